"""The shared core under every app: the API's error shape and typed domain errors (`errors`), safe JSON
checks (`safe_json`), the JSON parser (`parsers`) and strict serializer fields (`fields`). It imports no app."""
