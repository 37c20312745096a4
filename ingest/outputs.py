"""What the import operation answers."""
from rest_framework import serializers


class ImportFailure(serializers.Serializer):
    line = serializers.JSONField(help_text="the line (JSON Lines, CSV) or file (Markdown) of the record")
    reason = serializers.CharField()


class ImportOutput(serializers.Serializer):
    format = serializers.CharField()
    imported = serializers.IntegerField()
    updated = serializers.IntegerField()
    skipped = serializers.IntegerField(help_text="unchanged since an earlier import")
    failed = ImportFailure(many=True)
    knowledge_ids = serializers.ListField(child=serializers.CharField())
