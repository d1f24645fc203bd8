"""The one place that reaches into Dagster's private modules.

Each name below has no public equivalent in the Dagster versions we support (see pyproject):
the stale-status resolver and partition threshold `wse status` mirrors, the asset graph view,
the materialization a runless check evaluation targets (`assets/sync.py`),
the data-version tag and provenance reader, resource/context introspection for config source
assets, the implicit asset job name, and the workspace origin a CLI run needs to be re-executable
from the UI. `tests/platform/test_dagster_private.py` imports every name, so a Dagster upgrade
that moves one fails loudly there instead of deep inside a run.
"""
from __future__ import annotations

from dagster._core.asset_graph_view.asset_graph_view import AssetGraphView, TemporalContext
from dagster._core.definitions.asset_checks.asset_check_evaluation import (
    AssetCheckEvaluationTargetMaterializationData,
)
from dagster._core.decorator_utils import get_function_params
from dagster._core.definitions.assets.graph.asset_graph import AssetGraph
from dagster._core.definitions.assets.job.asset_job import IMPLICIT_ASSET_JOB_NAME
from dagster._core.definitions.data_version import (DATA_VERSION_TAG, CachingStaleStatusResolver, StaleStatus,
                                                    extract_data_provenance_from_entry)
from dagster._core.definitions.decorators.op_decorator import is_context_provided
from dagster._core.definitions.events import AssetKeyPartitionKey  # the resolver's cause sort keys (status_replay)
from dagster._core.definitions.observe import observe
from dagster._core.definitions.repository_definition.valid_definitions import SINGLETON_REPOSITORY_NAME
from dagster._core.definitions.resource_annotation import get_resource_args
from dagster._core.remote_origin import RemoteJobOrigin, RemoteRepositoryOrigin
from dagster._core.workspace.load_target import WorkspaceFileTarget
from dagster._time import get_current_datetime

try:  # the threshold Dagster uses; fall back to its documented value
    from dagster._core.definitions.data_version import (
        SKIP_PARTITION_DATA_VERSION_DEPENDENCY_THRESHOLD as PARTITION_THRESHOLD,
    )
except ImportError:  # pragma: no cover
    PARTITION_THRESHOLD = 100

__all__ = [
    "AssetCheckEvaluationTargetMaterializationData", "AssetGraph", "AssetKeyPartitionKey", "AssetGraphView", "CachingStaleStatusResolver",
    "DATA_VERSION_TAG", "IMPLICIT_ASSET_JOB_NAME",
    "PARTITION_THRESHOLD", "RemoteJobOrigin", "RemoteRepositoryOrigin", "SINGLETON_REPOSITORY_NAME", "StaleStatus",
    "TemporalContext", "WorkspaceFileTarget", "extract_data_provenance_from_entry", "get_current_datetime",
    "get_function_params", "get_resource_args", "is_context_provided", "observe",
]
