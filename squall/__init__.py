"""squall: a polite, distributed web crawler (StormCrawler's bolts as Faust agents over Kafka)."""

__version__ = "0.1.0"
