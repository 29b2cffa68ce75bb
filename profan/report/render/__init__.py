"""What the reader sees: the report as terminal text, Markdown, one HTML page, plots, CSV and
DataFrames, annotated HLO and the diff's Markdown, every one in the section order of
``outline``."""
