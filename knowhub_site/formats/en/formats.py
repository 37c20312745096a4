"""English dates as the curation UI has always shown them (ISO-like, 24-hour); Django's own for the rest.

Templates name the format (`date:"SHORT_DATETIME_FORMAT"`), so each language gets its own: Chinese
pages show 2026年11月27日 19:14 where English ones show 2026-11-27 19:14.
"""
SHORT_DATE_FORMAT = "Y-m-d"
SHORT_DATETIME_FORMAT = "Y-m-d H:i"
DATETIME_FORMAT = "Y-m-d H:i:s"
TIME_FORMAT = "H:i:s"
