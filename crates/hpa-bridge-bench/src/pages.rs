//! Synthetic but realistic exposition pages: many families of long label sets with every escape
//! the format has (`\"`, `\\`, `\n`), HELP and TYPE lines, and a few wanted series among them.

use std::fmt::Write;

/// Families an application page typically carries; none of them is wanted by the adapter.
const FAMILIES: &[&str] = &[
    "http_server_request_duration_seconds_bucket",
    "http_server_requests_total",
    "grpc_server_handled_total",
    "process_open_fds",
    "go_gc_duration_seconds",
    "db_client_connections_usage",
    "cache_lookups_total",
    "queue_messages_in_flight",
    "app:request_rate:5m",
    "jvm_memory_pool_bytes_used",
];

/// Escape-heavy text for label values, in tokens that are each valid on their own so a value can
/// be cut between tokens to reach a target length.
const PAD_TOKENS: &[&str] = &[
    "say \\\"hello\\\" ",
    "C:\\\\srv\\\\app ",
    "line\\nbreak ",
    "{braces,=commas} ",
    "plain-words-here ",
    "#hash ",
];

/// Appends `len` bytes of escape-heavy label-value text to `out`, starting at token `first`.
fn pad(out: &mut String, len: usize, first: usize) {
    let mut left = len;
    let mut t = first;
    while left > 0 {
        let tok = PAD_TOKENS[t % PAD_TOKENS.len()];
        if tok.len() > left {
            // Finish with plain letters so no escape is cut in half.
            out.extend(std::iter::repeat_n('x', left));
            break;
        }
        out.push_str(tok);
        left -= tok.len();
        t += 1;
    }
}

/// Appends `series` unwanted sample lines totalling roughly `bytes` bytes to `out`, spread over
/// families of `per_family` series, each family with HELP and TYPE lines. `tag` keeps label
/// values distinct between pages.
pub fn filler(out: &mut String, series: usize, bytes: usize, per_family: usize, tag: &str) {
    let per_family = per_family.max(1);
    let families = series.div_ceil(per_family);
    let overhead = families * 120;
    let line_target = bytes.saturating_sub(overhead) / series.max(1);
    let mut written = 0;
    for f in 0..families {
        let base = FAMILIES[f % FAMILIES.len()];
        let family = format!("{base}_{f}");
        let _ = writeln!(
            out,
            "# HELP {family} Synthetic family {f}: \\\"quoted\\\" help with a \\\\ backslash."
        );
        let _ = writeln!(out, "# TYPE {family} gauge");
        for i in 0..per_family {
            if written == series {
                break;
            }
            written += 1;
            let start = out.len();
            let _ = write!(
                out,
                "{family}{{method=\"GET\",route=\"/api/v1/tenants/{tag}/items/{i}\",status=\"200\",note=\""
            );
            let tail = format!("\"}} {}.5\n", written * 7 % 1000);
            let used = out.len() - start + tail.len();
            pad(out, line_target.saturating_sub(used), f + i);
            out.push_str(&tail);
        }
    }
}

/// The page the parse part measures: `series` unwanted series and 10 wanted
/// `hpa_expect_replicas` series in the middle, about `bytes` long in total.
pub fn parse_page(bytes: usize, series: usize) -> (Vec<u8>, usize) {
    const WANTED: usize = 10;
    let mut page = String::with_capacity(bytes + bytes / 8);
    let half = series / 2;
    let share = |n: usize| bytes * n / (series + WANTED);
    filler(&mut page, half, share(half), 50, "first");
    page.push_str("# HELP hpa_expect_replicas Replica count recommended by the service.\n");
    page.push_str("# TYPE hpa_expect_replicas gauge\n");
    for i in 0..WANTED {
        let _ = writeln!(
            page,
            "hpa_expect_replicas{{hpa_target_kind=\"StatefulSet\",hpa_target_name=\"w{i}\",hpa_target_api_version=\"apps/v1\",service_instance_id=\"w{i}-0\",note=\"leader \\\"elected\\\"\"}} {}",
            i + 1
        );
    }
    filler(&mut page, series - half, share(series - half), 50, "second");
    (page.into_bytes(), WANTED)
}

/// The worst page the limits let through: every line a wanted `hpa_expect_replicas` sample
/// with `labels` labels whose escape-heavy values fill the line to just under `line_bytes`.
/// Unwanted lines cost a newline search; these cost the full label parse, which is what a
/// hostile exporter would send. Returns the page and its number of lines.
pub fn adversarial_page(bytes: usize, labels: usize, line_bytes: usize) -> (Vec<u8>, usize) {
    let labels = labels.max(1);
    let mut page = String::with_capacity(bytes + line_bytes);
    page.push_str("# TYPE hpa_expect_replicas gauge\n");
    let mut lines = 0;
    while page.len() < bytes {
        let start = page.len();
        page.push_str("hpa_expect_replicas{");
        // Room per value: the line budget less the name, the `lNNN="",` framing and the tail.
        let per_value = line_bytes.saturating_sub(64 + labels * 9) / labels;
        for l in 0..labels {
            let _ = write!(page, "l{l}=\"{lines}-");
            pad(&mut page, per_value.saturating_sub(12), l);
            page.push_str("\",");
        }
        page.push_str("} 3\n");
        debug_assert!(page.len() - start < line_bytes);
        lines += 1;
    }
    (page.into_bytes(), lines)
}
