"""The pure InferenceService layer: modes, runtime/service merge, rendering, admission and
status rollup for OME's InferenceService, ServingRuntime and ClusterServingRuntime.

Everything here is a pure function of plain data: no I/O, clock, randomness, asyncio or
Kubernetes client. The shell observes an InferenceService into a ``ServiceSnapshot``, calls
``plan_service`` once and carries out the ``ServicePass`` (``render_service``'s
``ServicePlan``, the hand-overs, the rollout groups and the status, in order); its webhook
calls ``validate_isvc``.
"""

from omenative_core.service.accelerators import *  # noqa: F403
from omenative_core.service.cluster_config import *  # noqa: F403
from omenative_core.service.handover import *  # noqa: F403
from omenative_core.service.inheritance import *  # noqa: F403
from omenative_core.service.merge import *  # noqa: F403
from omenative_core.service.model import *  # noqa: F403
from omenative_core.service.models import *  # noqa: F403
from omenative_core.service.modes import *  # noqa: F403
from omenative_core.service.placeholders import *  # noqa: F403
from omenative_core.service.render import *  # noqa: F403
from omenative_core.service.resolve import *  # noqa: F403
from omenative_core.service.rollout_pass import *  # noqa: F403
from omenative_core.service.runtime_pin import *  # noqa: F403
from omenative_core.service.runtime_preset import *  # noqa: F403
from omenative_core.service.runtime_select import *  # noqa: F403
from omenative_core.service.service_pass import *  # noqa: F403
from omenative_core.service.status import *  # noqa: F403
from omenative_core.service.validate import *  # noqa: F403
from omenative_core.service.validate_lws import *  # noqa: F403
