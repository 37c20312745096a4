"""Chinese formats where the UI needs seconds (the audit log, webhook deliveries); Django's own for the rest."""
DATETIME_FORMAT = "Y年n月j日 H:i:s"
TIME_FORMAT = "H:i:s"
