//! Query strings: strict parsing (an unknown or repeated parameter is a 400 that names it, so a typo
//! never silently widens a query) and the time values of journal queries.

use std::str::FromStr;

use somna_core::Timestamp;

use crate::error::ApiError;

/// The parameters of one request's query string.
#[derive(Debug, Default)]
pub(crate) struct Params {
    pairs: Vec<(String, String)>,
}

impl Params {
    /// Parses `query`. Every name must be in `allowed`; only the names in `repeatable` may appear
    /// more than once.
    pub(crate) fn parse(
        query: &str,
        allowed: &[&str],
        repeatable: &[&str],
    ) -> Result<Params, ApiError> {
        let mut pairs: Vec<(String, String)> = Vec::new();
        for (name, value) in url::form_urlencoded::parse(query.as_bytes()) {
            if name.is_empty() && value.is_empty() {
                continue;
            }
            if !allowed.contains(&name.as_ref()) {
                let expected = if allowed.is_empty() {
                    "this endpoint takes no query parameters".to_string()
                } else {
                    format!("expected one of: {}", allowed.join(", "))
                };
                return Err(ApiError::bad_param(
                    &name,
                    format!("unknown query parameter ({expected})"),
                ));
            }
            if !repeatable.contains(&name.as_ref()) && pairs.iter().any(|(n, _)| *n == name) {
                return Err(ApiError::bad_param(&name, "given more than once"));
            }
            pairs.push((name.into_owned(), value.into_owned()));
        }
        Ok(Params { pairs })
    }

    /// The value of `name`, if given.
    pub(crate) fn get(&self, name: &str) -> Option<&str> {
        self.pairs
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// Every value of `name`, in order.
    pub(crate) fn all(&self, name: &str) -> impl Iterator<Item = &str> {
        self.pairs
            .iter()
            .filter(move |(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// The value of `name` parsed as a `T`.
    pub(crate) fn parsed<T: FromStr>(&self, name: &str, what: &str) -> Result<Option<T>, ApiError> {
        self.get(name)
            .map(|v| {
                v.trim()
                    .parse::<T>()
                    .map_err(|_| ApiError::bad_param(name, format!("expected {what}, got {v:?}")))
            })
            .transpose()
    }

    /// `limit`: `default` when absent, else 1 to `max`.
    pub(crate) fn limit(&self, default: usize, max: usize) -> Result<usize, ApiError> {
        match self.parsed::<usize>("limit", "a whole number")? {
            None => Ok(default),
            Some(n) if (1..=max).contains(&n) => Ok(n),
            Some(n) => Err(ApiError::bad_param(
                "limit",
                format!("must be between 1 and {max}, got {n}"),
            )),
        }
    }
}

/// Why a journal time bound is not one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum TimeBoundError {
    #[error("is empty")]
    Empty,
    #[error(
        "expected a duration meaning that long ago (like `1d` or `90m`) or an RFC 3339 time \
(like `2026-11-21T10:00:00Z`), got {0:?}"
    )]
    Unrecognized(String),
}

/// Parses a journal time bound: a humantime duration meaning "that long before `now`" (`1d`,
/// `90m`, `1h 30m`) or an RFC 3339 time (`2026-11-21T10:00:00Z`).
pub(crate) fn parse_time(value: &str, now: Timestamp) -> Result<Timestamp, TimeBoundError> {
    let value = value.trim();
    if value.is_empty() {
        return Err(TimeBoundError::Empty);
    }
    if let Ok(ago) = humantime::parse_duration(value) {
        return Ok(now.saturating_sub(ago));
    }
    Timestamp::parse_rfc3339(value).map_err(|_| TimeBoundError::Unrecognized(value.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strict_names() {
        let p = Params::parse("limit=5&tag=a&tag=b", &["limit", "tag"], &["tag"]).unwrap();
        assert_eq!(p.limit(10, 100).unwrap(), 5);
        assert_eq!(p.all("tag").collect::<Vec<_>>(), ["a", "b"]);
        let e = Params::parse("limt=5", &["limit"], &[]).unwrap_err();
        assert_eq!(e.fields[0].field, "limt");
        let e = Params::parse("limit=5&limit=6", &["limit"], &[]).unwrap_err();
        assert!(e.message.contains("more than once"), "{}", e.message);
        assert!(Params::parse("", &[], &[]).is_ok());
        assert!(Params::parse("&", &[], &[]).is_ok());
    }

    #[test]
    fn limits() {
        let p = Params::parse("limit=0", &["limit"], &[]).unwrap();
        assert!(p.limit(10, 100).is_err());
        let p = Params::parse("limit=-1", &["limit"], &[]).unwrap();
        assert!(p.limit(10, 100).is_err());
        let p = Params::parse("", &["limit"], &[]).unwrap();
        assert_eq!(p.limit(10, 100).unwrap(), 10);
    }

    #[test]
    fn times() {
        let now = Timestamp::parse_rfc3339("2026-11-21T10:00:00Z").unwrap();
        assert_eq!(
            parse_time("1d", now).unwrap().to_string(),
            "2026-11-20T10:00:00.000Z"
        );
        assert_eq!(
            parse_time("1h 30m", now).unwrap().to_string(),
            "2026-11-21T08:30:00.000Z"
        );
        assert_eq!(
            parse_time("2026-11-01T00:00:00Z", now).unwrap().to_string(),
            "2026-11-01T00:00:00.000Z"
        );
        assert_eq!(parse_time("100000y", now).unwrap(), Timestamp::ZERO);
        assert_eq!(
            parse_time("yesterday", now),
            Err(TimeBoundError::Unrecognized("yesterday".into()))
        );
        assert_eq!(parse_time(" ", now), Err(TimeBoundError::Empty));
    }
}
