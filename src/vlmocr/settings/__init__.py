"""Settings: config (RunConfig, frozen once made; the settings key; the Endpoint a started
server hands the readers), envvars (the VLMOCR_* environment), models (pinned model folders).
Model profiles are data in vlmocr/profiles/."""
