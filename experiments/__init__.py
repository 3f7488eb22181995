"""The study: run workloads on the devices at hand, record them, report on the records."""
