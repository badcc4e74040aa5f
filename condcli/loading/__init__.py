"""Loading a model: MODEL spec → LoadedModel, with its weights, config checks, devices and hub."""
