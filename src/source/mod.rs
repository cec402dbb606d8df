//! Where samples come from: direct scraping (the embedded default) and, later, discovery and
//! a Prometheus-compatible query source.

pub mod scrape;
