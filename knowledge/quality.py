"""The seed's quality of an item, defined once: score + helpful - 2 * harmful (seed 003).

`quality_score` for values in hand (the model, search candidates), `QUALITY` for the database
(filters, the curation list's sort, the admin's column): `Knowledge.objects.with_quality()`.
"""
from django.db.models import ExpressionWrapper, F, IntegerField

HARMFUL_WEIGHT = 2

QUALITY = ExpressionWrapper(F("score") + F("helpful") - HARMFUL_WEIGHT * F("harmful"), output_field=IntegerField())


def quality_score(score: int, helpful: int, harmful: int) -> float:
    return float(score + helpful - HARMFUL_WEIGHT * harmful)
