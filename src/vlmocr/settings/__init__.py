"""Settings: config (RunConfig, frozen once made; the settings key; the Endpoint a started
server hands the readers), models (pinned model folders); the VLMOCR_* environment is vlmocr/envvars.py.
Model profiles are data in vlmocr/profiles/."""
