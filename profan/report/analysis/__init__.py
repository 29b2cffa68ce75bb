"""From a trace to a ``Report``: the pipeline (load, describe sharding, score, build, cache) and
the report's sections built from the scored profile (summary, memory, hosts, GEMMs, kernels,
splits, notes, the HTML page's extra data)."""
