//! The Prometheus text exposition format (version 0.0.4): headers, samples, histograms, and the
//! escaping of label values and help text.

use std::fmt::Write as _;

pub(super) fn header(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {}", escape_help(help));
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

/// A family of one unlabeled sample: its header, then `name value`.
pub(super) fn single(out: &mut String, name: &str, kind: &str, help: &str, value: f64) {
    header(out, name, kind, help);
    sample(out, name, &[], value);
}

/// A family whose samples differ in one label: its header, then `name{label="v"} value` for each
/// `(v, value)` of `values`, in their order.
pub(super) fn labeled<'a>(
    out: &mut String,
    name: &str,
    kind: &str,
    help: &str,
    label: &str,
    values: impl IntoIterator<Item = (&'a str, f64)>,
) {
    header(out, name, kind, help);
    for (v, value) in values {
        sample(out, name, &[(label, v)], value);
    }
}

/// The `_bucket` (cumulative, `le` last among the labels), `_sum` and `_count` samples of the
/// histogram `name` whose buckets' upper `bounds` hold `counts` (not cumulative; one more than the
/// bounds, for `+Inf`).
pub(super) fn histogram(
    out: &mut String,
    name: &str,
    labels: &[(&str, &str)],
    bounds: &[f64],
    counts: &[u64],
    sum: f64,
) {
    debug_assert_eq!(counts.len(), bounds.len() + 1);
    let bucket = format!("{name}_bucket");
    let mut cumulative = 0u64;
    for (i, n) in counts.iter().enumerate() {
        cumulative += n;
        let le = bounds
            .get(i)
            .map_or_else(|| "+Inf".to_string(), |b| format_float(*b));
        let mut with_le = labels.to_vec();
        with_le.push(("le", &le));
        sample(out, &bucket, &with_le, cumulative as f64);
    }
    sample(out, &format!("{name}_sum"), labels, sum);
    sample(out, &format!("{name}_count"), labels, cumulative as f64);
}

pub(super) fn sample(out: &mut String, name: &str, labels: &[(&str, &str)], value: f64) {
    out.push_str(name);
    if !labels.is_empty() {
        out.push('{');
        for (i, (k, v)) in labels.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            let _ = write!(out, "{k}=\"{}\"", escape_label(v));
        }
        out.push('}');
    }
    out.push(' ');
    out.push_str(&format_float(value));
    out.push('\n');
}

/// A sample value: integers without a fraction, others in the shortest form that round-trips.
fn format_float(v: f64) -> String {
    if v.is_nan() {
        "NaN".to_string()
    } else if v.is_infinite() {
        if v > 0.0 { "+Inf" } else { "-Inf" }.to_string()
    } else if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{}", v as i64)
    } else {
        format!("{v}")
    }
}

fn escape_label(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

fn escape_help(v: &str) -> String {
    v.replace('\\', "\\\\").replace('\n', "\\n")
}
