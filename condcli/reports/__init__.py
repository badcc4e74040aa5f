"""The reports the analysis commands build (dataclasses and their JSON) and the metric registry."""
