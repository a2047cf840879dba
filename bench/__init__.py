"""`make bench`: decode throughput of kafka_log_decoder beside peers measured in the same run."""
