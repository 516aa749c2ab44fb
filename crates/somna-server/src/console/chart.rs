//! The usage chart of one agent, drawn as SVG by `plotters` from the agent's event log.
//!
//! The log has no sample of usage between events, so the line is what the log knows: at every
//! compaction and masking the prompt's tokens before and after (a drop), joined to the next one
//! (the growth in between), ending at the current usage. Sleeps are vertical marks; compactions are
//! marked by trigger (emergencies in red); the sleep and emergency thresholds are dashed lines.

use plotters::prelude::*;
use somna_core::{EventRecord, LoggedEvent, Timestamp, Trigger};

/// What is marked on the chart, and listed under it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mark {
    Compaction,
    Emergency,
    Sleep,
    Masking,
}

impl Mark {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Mark::Compaction => "compaction",
            Mark::Emergency => "emergency",
            Mark::Sleep => "sleep",
            Mark::Masking => "masking",
        }
    }

    fn color(self) -> RGBColor {
        match self {
            Mark::Compaction => RGBColor(0x1f, 0x77, 0xb4),
            Mark::Emergency => RGBColor(0xd6, 0x27, 0x28),
            Mark::Sleep => RGBColor(0x2c, 0xa0, 0x2c),
            Mark::Masking => RGBColor(0x94, 0x67, 0xbd),
        }
    }

    /// The mark's color as the SVG writes it (`#1F77B4`), for readers of the SVG.
    pub(crate) fn hex(self) -> String {
        let RGBColor(r, g, b) = self.color();
        format!("#{r:02X}{g:02X}{b:02X}")
    }
}

/// One marked event: when, what, and the usage (fraction of the window) it left.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Marked {
    pub(crate) at: Timestamp,
    pub(crate) mark: Mark,
    pub(crate) seq: u64,
    /// Usage before and after (compactions and maskings), as fractions of the window.
    pub(crate) before: Option<f64>,
    pub(crate) after: Option<f64>,
    pub(crate) label: String,
    /// For a compaction still in history: its summary's seq (what undoing it names).
    pub(crate) summary_seq: Option<u64>,
}

/// The log seq of the compaction an uncompact of the current summary would undo: the newest
/// compaction not undone since (an `uncompaction` undoes the newest one left with its summary's
/// seq). `None` when every compaction was undone.
pub(crate) fn undoable(events: &[LoggedEvent]) -> Option<u64> {
    let mut standing: Vec<(u64, u64)> = Vec::new(); // (log seq, summary seq)
    for e in events {
        match &e.event {
            EventRecord::Compaction(r) => standing.push((e.seq, r.summary_seq)),
            EventRecord::Uncompaction { summary_seq, .. } => {
                if let Some(i) = standing.iter().rposition(|(_, s)| s == summary_seq) {
                    standing.remove(i);
                }
            }
            _ => {}
        }
    }
    standing.last().map(|(seq, _)| *seq)
}

/// The marks and the usage line of an agent's log (oldest first), `window` tokens wide. A
/// compaction record keeps its usage as calibrated at the time and is drawn at it; older records
/// and masking events keep only local token counts, calibrated here by `factor` (the agent's
/// applied factor now), so that the whole line is on the scale of the usage and the thresholds,
/// which are calibrated.
pub(crate) fn marks(events: &[LoggedEvent], window: u64, factor: f64) -> Vec<Marked> {
    let factor = if factor.is_finite() {
        factor.max(1.0)
    } else {
        1.0
    };
    let frac = |tokens: u64| tokens as f64 * factor / window.max(1) as f64;
    events
        .iter()
        .filter_map(|e| {
            let summary_seq = match &e.event {
                EventRecord::Compaction(r) => Some(r.summary_seq),
                _ => None,
            };
            let (mark, before, after, label) = match &e.event {
                EventRecord::Compaction(r) => (
                    if r.trigger == Trigger::Emergency {
                        Mark::Emergency
                    } else {
                        Mark::Compaction
                    },
                    Some(r.usage_before.unwrap_or_else(|| frac(r.tokens_before))),
                    Some(r.usage_after.unwrap_or_else(|| frac(r.tokens_after))),
                    format!(
                        "{} compaction: {} → {} tokens{}",
                        r.trigger,
                        r.tokens_before,
                        r.tokens_after,
                        grounded(r.grounding)
                    ),
                ),
                EventRecord::Masking {
                    tokens_before,
                    tokens_after,
                    masked,
                    ..
                } => (
                    Mark::Masking,
                    Some(frac(*tokens_before)),
                    Some(frac(*tokens_after)),
                    format!("{masked} tool outputs masked"),
                ),
                EventRecord::EmergencyFallback { reason, .. } => (
                    Mark::Emergency,
                    None,
                    None,
                    format!("emergency fallback: {reason}"),
                ),
                EventRecord::Sleep {
                    facts, grounding, ..
                } => (
                    Mark::Sleep,
                    None,
                    None,
                    format!("sleep ({facts} facts){}", grounded(*grounding)),
                ),
                _ => return None,
            };
            Some(Marked {
                at: e.event.at(),
                mark,
                seq: e.seq,
                before,
                after,
                label,
                summary_seq,
            })
        })
        .collect()
}

/// The chart as an SVG document: `marks` (oldest first), the current usage at `now`, and the
/// thresholds (fractions).
pub(crate) fn svg(
    marks: &[Marked],
    now: Timestamp,
    usage: f64,
    sleep_threshold: f64,
    emergency_threshold: f64,
) -> String {
    let start = marks
        .first()
        .map_or(now.0.saturating_sub(60_000), |m| m.at.0);
    let span = now.0.saturating_sub(start).max(1_000);
    // x in minutes from the first event, labelled with the time of day (and the date when the
    // span passes a day); y in percent of the window.
    let x = |t: Timestamp| t.0.saturating_sub(start) as f64 / 60_000.0;
    let x_end = span as f64 / 60_000.0;
    let x_label = |minutes: &f64| clock_label(start, *minutes, span);
    let mut line: Vec<(f64, f64)> = Vec::new();
    for m in marks {
        if let (Some(b), Some(a)) = (m.before, m.after) {
            line.push((x(m.at), b * 100.0));
            line.push((x(m.at), a * 100.0));
        }
    }
    line.push((x_end, usage * 100.0));
    let y_top = line
        .iter()
        .map(|p| p.1)
        .fold(emergency_threshold * 100.0, f64::max)
        .max(100.0)
        * 1.05;
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, (720, 260)).into_drawing_area();
        let drawn = (|| -> Result<(), Box<dyn std::error::Error + '_>> {
            root.fill(&WHITE)?;
            let mut chart = ChartBuilder::on(&root)
                .margin(8)
                .x_label_area_size(30)
                .y_label_area_size(40)
                .build_cartesian_2d(0f64..x_end * 1.02, 0f64..y_top)?;
            chart
                .configure_mesh()
                .x_desc(axis_desc(start, span))
                .x_label_formatter(&x_label)
                .x_labels(8)
                .y_desc("usage %")
                .light_line_style(WHITE.mix(0.0))
                .draw()?;
            for (threshold, color) in [
                (sleep_threshold, RGBColor(0xff, 0x7f, 0x0e)),
                (emergency_threshold, RGBColor(0xd6, 0x27, 0x28)),
            ] {
                let y = threshold * 100.0;
                chart.draw_series(DashedLineSeries::new(
                    vec![(0.0, y), (x_end * 1.02, y)],
                    6,
                    4,
                    color.stroke_width(1),
                ))?;
            }
            chart.draw_series(LineSeries::new(line.clone(), BLACK.stroke_width(2)))?;
            for m in marks {
                let color = m.mark.color();
                match (m.mark, m.after) {
                    (Mark::Sleep, _) | (_, None) => {
                        chart.draw_series(LineSeries::new(
                            vec![(x(m.at), 0.0), (x(m.at), y_top)],
                            color.stroke_width(2),
                        ))?;
                    }
                    (_, Some(after)) => {
                        chart.draw_series(std::iter::once(Circle::new(
                            (x(m.at), after * 100.0),
                            5,
                            color.filled(),
                        )))?;
                    }
                }
            }
            root.present()?;
            Ok(())
        })();
        if let Err(e) = drawn {
            tracing::warn!(error = %e, "cannot draw the usage chart");
        }
    }
    out
}

/// A day in milliseconds: past it, the chart's time labels carry the date.
const DAY_MS: u64 = 24 * 60 * 60 * 1000;

/// Spans shorter than this are labelled in seconds since the start (clock times would repeat).
const SHORT_MS: u64 = 2 * 60 * 1000;

/// The time `at` (ms since the epoch) in RFC 3339 UTC to the second: `2026-11-28T14:05:30Z`.
fn rfc3339(at: u64) -> String {
    humantime::format_rfc3339_seconds(Timestamp(at).to_system_time()).to_string()
}

/// The time axis's description for a chart from `start` spanning `span` ms.
fn axis_desc(start: u64, span: u64) -> String {
    if span < SHORT_MS {
        format!("seconds since {} (UTC)", &rfc3339(start)[11..19])
    } else if span > DAY_MS {
        "time (UTC, month-day hour:minute)".to_string()
    } else {
        "time of day (UTC)".to_string()
    }
}

/// The label of the time `minutes` after `start` (ms since the epoch) on an axis spanning
/// `span` ms: `12.5` seconds under two minutes, else the clock time — `14:05:30` under ten
/// minutes, `14:05` up to a day, `11-28 14:05` past it.
fn clock_label(start: u64, minutes: f64, span: u64) -> String {
    let minutes = minutes.max(0.0);
    if span < SHORT_MS {
        return format!("{:.1}", minutes * 60.0);
    }
    let full = rfc3339(start.saturating_add((minutes * 60_000.0) as u64));
    let (date, time) = (&full[5..10], &full[11..19]);
    if span > DAY_MS {
        format!("{date} {}", &time[..5])
    } else if span < 10 * 60_000 {
        time.to_string()
    } else {
        time[..5].to_string()
    }
}

/// What the grounding check did, as a mark's label ends: `; items 12 kept, 1 repaired, 2 dropped`.
fn grounded(g: Option<somna_core::GroundingCounts>) -> String {
    g.filter(|g| g.total() > 0)
        .map_or_else(String::new, |g| format!("; items {g}"))
}

#[cfg(test)]
mod tests {
    use somna_core::{CompactionMethod, CompactionRecord};

    use super::*;

    fn logged(seq: u64, event: EventRecord) -> LoggedEvent {
        LoggedEvent {
            seq,
            event,
            by: None,
        }
    }

    #[test]
    fn compactions_sleeps_and_emergencies_are_marked_in_their_colors() {
        let record = |at, trigger, tokens_before, tokens_after| CompactionRecord {
            tokens_before,
            tokens_after,
            ..CompactionRecord::new(at, trigger, CompactionMethod::Llm, (0, 9), 10, 1)
        };
        let manual = record(Timestamp(60_000), Trigger::Manual, 800, 300);
        let emergency = record(Timestamp(180_000), Trigger::Emergency, 900, 200);
        let events = [
            logged(0, EventRecord::Compaction(manual)),
            logged(
                1,
                EventRecord::Sleep {
                    at: Timestamp(120_000),
                    due: None,
                    next: Timestamp(999_999),
                    entries: 0,
                    facts: 2,
                    reflections: 0,
                    grounding: None,
                    failures: vec![],
                },
            ),
            logged(2, EventRecord::Compaction(emergency)),
            logged(
                3,
                EventRecord::Note {
                    at: Timestamp(200_000),
                    text: "not marked".into(),
                },
            ),
        ];
        let marks = marks(&events, 1000, 1.0);
        let kinds: Vec<_> = marks.iter().map(|m| m.mark).collect();
        assert_eq!(kinds, [Mark::Compaction, Mark::Sleep, Mark::Emergency]);
        assert_eq!(marks[0].after, Some(0.3));
        // Calibrated as the thresholds are: 300 local tokens at 1.2 are 0.36 of the window.
        let calibrated = super::marks(&events, 1000, 1.2);
        assert!((calibrated[0].after.unwrap() - 0.36).abs() < 1e-9);
        // A record that kept its calibrated usage is drawn at it, whatever the factor is now.
        let kept = CompactionRecord {
            usage_before: Some(0.95),
            usage_after: Some(0.42),
            ..record(Timestamp(60_000), Trigger::Sleep, 800, 300)
        };
        let drawn = super::marks(&[logged(0, EventRecord::Compaction(kept))], 1000, 1.2);
        assert_eq!((drawn[0].before, drawn[0].after), (Some(0.95), Some(0.42)));
        let svg = svg(&marks, Timestamp(240_000), 0.4, 0.7, 0.8);
        assert!(svg.starts_with("<svg"), "{}", &svg[..80]);
        for mark in [Mark::Compaction, Mark::Sleep, Mark::Emergency] {
            assert!(svg.contains(&mark.hex()), "{mark:?} is not drawn");
        }
        assert!(!svg.contains(&Mark::Masking.hex()));
    }

    #[test]
    fn the_time_axis_reads_in_seconds_clock_time_or_dates_by_its_span() {
        // 2026-11-28T14:05:30Z.
        let start = 1_795_874_730_000;
        assert_eq!(clock_label(start, 0.25, 90_000), "15.0");
        assert_eq!(clock_label(start, 0.0, 5 * 60_000), "14:05:30");
        assert_eq!(clock_label(start, 90.0, 3 * 60 * 60_000), "15:35");
        assert_eq!(clock_label(start, 600.0, 2 * DAY_MS), "11-29 00:05");
        assert_eq!(axis_desc(start, 90_000), "seconds since 14:05:30 (UTC)");
        // No mark: the last minute, in seconds since its start.
        let svg = svg(&[], Timestamp(start + 60_000), 0.2, 0.7, 0.8);
        assert!(svg.contains("seconds since 14:05:30 (UTC)"), "{svg}");
        assert!(
            svg.lines().any(|l| l.trim() == "30.0"),
            "a label is drawn: {svg}"
        );
    }

    #[test]
    fn only_the_newest_standing_compaction_can_be_undone() {
        let record = |at| {
            EventRecord::Compaction(CompactionRecord::new(
                Timestamp(at),
                Trigger::Manual,
                CompactionMethod::Llm,
                (0, 9),
                10,
                1,
            ))
        };
        let undone = EventRecord::Uncompaction {
            at: Timestamp(5),
            summary_seq: 0,
            summary: "s".into(),
            restored: 3,
        };
        let mut log = vec![logged(0, record(1)), logged(1, record(2))];
        assert_eq!(undoable(&log), Some(1));
        log.push(logged(2, undone.clone()));
        assert_eq!(undoable(&log), Some(0), "the one before is undone next");
        log.push(logged(3, undone));
        assert_eq!(undoable(&log), None);
        assert_eq!(undoable(&[]), None);
    }
}
