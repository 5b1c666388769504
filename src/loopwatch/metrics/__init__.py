"""The metric side: the catalog of families, the collectors that hold their numbers, the
exposition's size bound, and the exporter that turns turn summaries into them."""
