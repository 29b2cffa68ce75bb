"""profan's cache store: entries of bytes under content keys, data only (no pickle), bounded,
under the user's cache directory (never beside a trace).  It knows no profan type: each package
keeps its own codec beside what it stores and calls the store with bytes and keys.

**Why three levels.**  A cold ``profan report`` of the 69 MB benchmark trace spends its time
reading (decode and join), scoring and building, and a re-open should cost about what Python's
start does.  Reading a stored profile back takes ~0.08 s instead of ~1.5 s, but scoring it
again still costs a second and needs pandas, so the profile alone cannot make a re-open fast;
the report alone would not serve another ``--chip`` or rule set.  Hence:

1. **a loaded profile** per run, and per pod host its reduced result (``profan.trace.stored``,
   wired in ``profan.trace.pod``): keyed by the content of the trace files and of ``--hlo``
   only (``profan.trace.fingerprint``), so any other chip, rule set or budget re-scores it
   without reading the trace;
2. **the built report** per inputs and every option that changes it (``profan.report.stored``,
   wired in ``profan.report.analysis.pipeline``): ``check``, ``diff``, ``annotate`` and every format
   read it;
3. **what a command printed** from reports (the report's text per format, terminal width and
   colour; a check's output, exit code and JUnit XML; a diff; an annotated module), keyed by the
   report's key and the rendering's options: a re-open then imports neither the renderers nor
   pandas, and skips what rendering itself costs (the JSON encoder: ~0.4 s on that trace).

Below them, HLO modules (``profan.hlo.stored``) and the parser's tables
(``profan.hlo.stored_tables``) are cached as data.

**Modules.**  ``store``: the entry format (msgpack header naming the key, raw aligned blobs, a
keyed MAC; a damaged, truncated, forged or foreign entry is a miss), the kinds of entry and the
LRU bound, which removes only entries the store wrote.  ``trust``: whether profan may use the
cache directory (made by profan, the user's alone, no link followed) and the key of its MAC.
``keys``: SHA-256 keys of the inputs, the options, profan's version and a hash of its code;
local files by content with a stat shortcut, remote objects by generation/ETag.  ``frames``:
pandas tables as raw columns (for the codecs that store tables).
"""
