"""Types the core reads and writes: spec, status, observed views, config and plans."""

from omenative_core.model.config import *  # noqa: F403
from omenative_core.model.observed import *  # noqa: F403
from omenative_core.model.plan import *  # noqa: F403
from omenative_core.model.spec import *  # noqa: F403
from omenative_core.model.status import *  # noqa: F403
from omenative_core.model.timefmt import *  # noqa: F403
