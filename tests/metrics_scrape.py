"""Reading a /metrics scrape in tests: the value of one sample, by name and labels."""
from prometheus_client.parser import text_string_to_metric_families


def samples(text: str) -> list:
    return [sample for family in text_string_to_metric_families(text) for sample in family.samples]


def value(text: str, name: str, **labels) -> float:
    """The sum of the samples called `name` whose labels include `labels` (0 when none)."""
    return sum(s.value for s in samples(text) if s.name == name and labels.items() <= s.labels.items())


def families(text: str) -> set[str]:
    return {family.name for family in text_string_to_metric_families(text)}
