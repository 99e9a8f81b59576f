"""EKS's Kubernetes release calendar (providers/aws/eks-versions.tsv, with its sources) and the day of the run
it is judged on: FLEETFORM_TODAY=YYYY-MM-DD sets it (tests pin it, as the keeper's tests pin FLEETFORM_NOW).
Read by the rules eks-version and eks-version-support (fleetform/rules/eks.py) and by hints that suggest a
version; no rule module is imported here, so importing it never registers rules out of order."""

from __future__ import annotations

import datetime
import os
from functools import lru_cache
from importlib import resources

from .records import frozen

EXTENDED_PRICE = "$0.60 per cluster per hour, against $0.10 in standard support"
"""EKS's price of a cluster in extended support (AWS Containers blog, "Amazon EKS extended support for
Kubernetes versions pricing", effective April 2024; EKS pricing page)."""
CALENDAR_SOURCE = "EKS release calendar, providers/aws/eks-versions.tsv"


@frozen
class EksVersion:
    version: str
    end_of_standard: datetime.date
    end_of_extended: datetime.date

    @property
    def minor(self) -> tuple[int, int]:
        major, minor = self.version.split(".")
        return int(major), int(minor)


@lru_cache(maxsize=1)
def calendar() -> tuple[EksVersion, ...]:
    """Every version of the calendar, oldest first."""
    text = resources.files("fleetform.providers.aws").joinpath("eks-versions.tsv").read_text(encoding="utf-8")
    rows = []
    for line in text.splitlines():
        if line and not line.startswith("#") and not line.startswith("version\t"):
            version, _released, standard, extended, _source = line.split("\t")
            rows.append(EksVersion(version, datetime.date.fromisoformat(standard), datetime.date.fromisoformat(extended)))
    return tuple(sorted(rows, key=lambda r: r.minor))


def today() -> datetime.date:
    """The day of the run (UTC), or FLEETFORM_TODAY's; ValueError names a FLEETFORM_TODAY that is no date."""
    value = os.environ.get("FLEETFORM_TODAY")
    if value:
        try:
            return datetime.date.fromisoformat(value.strip())
        except ValueError:
            raise ValueError(f"FLEETFORM_TODAY={value!r} is not a date (YYYY-MM-DD)") from None
    return datetime.datetime.now(datetime.timezone.utc).date()


def in_standard_support(day: datetime.date) -> list[EksVersion]:
    """Versions EKS supports on that day without the extended-support charge, oldest first (standard support
    ends at the beginning of its end date, UTC: billing for extended support starts that day)."""
    return [v for v in calendar() if day < v.end_of_standard]


def newest_in_standard_support(day: datetime.date, highest: tuple[int, int]) -> str | None:
    """The version to suggest where none is chosen: the newest in standard support that fleetform renders for."""
    fits = [v for v in in_standard_support(day) if v.minor <= highest]
    return fits[-1].version if fits else None


def out_of_date_hint(day: datetime.date) -> str:
    """The hint where a list of versions in standard support would be empty: the calendar is data read on a day,
    and from its newest row's end of standard support on it names no version to move to."""
    return (f"no version of fleetform's EKS calendar (providers/aws/eks-versions.tsv) is in standard support on {day}: "
            "the calendar is out of date; `aws eks describe-cluster-versions` lists the versions EKS offers with "
            "their dates: add their rows to the file with their source, or update fleetform")
