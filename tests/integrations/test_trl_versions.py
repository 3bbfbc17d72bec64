"""`vfgym.integrations.trl.versions`: a TRL outside the tested range is refused by name."""

from __future__ import annotations

import pytest
from tiny_policy import require_trl

from vfgym.errors import IntegrationVersionError, VFGymError
from vfgym.integrations.trl.versions import check_trl_version


@pytest.mark.parametrize("installed", ["1.16.0", "1.16.3", "1.16.1.dev0"])
def test_a_tested_trl_version_passes(installed: str) -> None:
    assert check_trl_version(installed) == installed


@pytest.mark.parametrize("installed", ["1.15.0", "1.17.0", "0.29.1", "2.0.0"])
def test_a_trl_version_outside_the_range_is_refused_naming_both(installed: str) -> None:
    with pytest.raises(IntegrationVersionError) as caught:
        check_trl_version(installed)
    message = str(caught.value)
    assert f"TRL {installed} is installed" in message
    assert ">=1.16,<1.17" in message
    assert 'pip install "vfgym[trl]"' in message
    assert isinstance(caught.value, VFGymError) and isinstance(caught.value, ImportError)


def test_the_installed_trl_is_in_the_range() -> None:
    require_trl()
    check_trl_version()
