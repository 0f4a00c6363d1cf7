"""The legacy surface's HTTP errors cross a process boundary (a multiprocessing pool's task)."""

from __future__ import annotations

import pickle

import pytest

from tablesdk.legacy import (
    AzureBatchOperationError, AzureConflictHttpError, AzureException, AzureHttpError, AzureMissingResourceHttpError,
)


@pytest.mark.parametrize(("error", "kind"), [
    (AzureHttpError("gone", 404), AzureMissingResourceHttpError),
    (AzureHttpError("taken", 409), AzureConflictHttpError),
    (AzureHttpError("busy", 503), AzureHttpError),
    (AzureBatchOperationError("1:bad", 400, "InvalidInput"), AzureBatchOperationError),
])
def test_http_errors_pickle(error: AzureException, kind: type[AzureException]) -> None:
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is kind and str(copy) == str(error)
    assert vars(copy) == vars(error)
