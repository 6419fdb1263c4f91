module omenative.local/modelserver

go 1.22
