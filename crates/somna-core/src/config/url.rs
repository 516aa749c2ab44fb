//! Database and message-bus URLs that never show their password: [`DbUrl`], [`redact_url`] and
//! [`url_credentials`].

use std::fmt;

use serde::{Deserialize, Serialize};

/// A database URL that never shows its password: `Debug`, `Display` and `Serialize` (so
/// `check-config --json` too) give `postgres://user:***@host/db`; [`DbUrl::expose`] gives the
/// real text to the driver.
#[derive(Clone, PartialEq, Eq, Default, Deserialize)]
#[serde(transparent)]
pub struct DbUrl(String);

impl Serialize for DbUrl {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.redacted())
    }
}

impl DbUrl {
    /// Wraps a URL.
    pub fn new(url: impl Into<String>) -> Self {
        DbUrl(url.into())
    }

    /// The URL itself, password included: only for the database driver.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// True when no URL is set.
    pub fn is_empty(&self) -> bool {
        self.0.trim().is_empty()
    }

    /// The URL with its password (if any) replaced by `***`.
    pub fn redacted(&self) -> String {
        redact_url(&self.0)
    }
}

impl fmt::Debug for DbUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.redacted())
    }
}

impl fmt::Display for DbUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.redacted())
    }
}

/// `scheme://user:password@host…` → `scheme://user:***@host…`; also a `password=` parameter of
/// the query string or of a key=value connection string. Anything without a password is returned
/// as it is.
pub fn redact_url(url: &str) -> String {
    let mut out = match url_credentials(url) {
        Some(c) => format!("{}://{}:***@{}", c.scheme, c.user, c.rest),
        None => url.to_string(),
    };
    // `password=…` up to the next `&` or white space.
    let mut searched = 0;
    while let Some(at) = out[searched..].to_ascii_lowercase().find("password=") {
        let start = searched + at + "password=".len();
        let end = out[start..]
            .find(|c: char| c == '&' || c.is_whitespace())
            .map_or(out.len(), |e| start + e);
        out.replace_range(start..end, "***");
        searched = start + 3;
    }
    out
}

/// The parts of `scheme://user:password@host…` around its credentials.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UrlCredentials<'a> {
    pub scheme: &'a str,
    pub user: &'a str,
    pub password: &'a str,
    /// `host…`: what follows the `@`.
    pub rest: &'a str,
}

impl UrlCredentials<'_> {
    /// The URL without its credentials: `scheme://host…`.
    pub fn bare_url(&self) -> String {
        format!("{}://{}", self.scheme, self.rest)
    }
}

/// The credentials of `scheme://user:password@host…`; `None` when the URL carries no password.
pub fn url_credentials(url: &str) -> Option<UrlCredentials<'_>> {
    let (scheme, rest) = url.split_once("://")?;
    let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (userinfo, _) = rest[..authority_end].rsplit_once('@')?;
    let (user, password) = userinfo.split_once(':')?;
    Some(UrlCredentials {
        scheme,
        user,
        password,
        rest: &rest[userinfo.len() + 1..],
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ClusterSection;

    #[test]
    fn urls_never_show_their_password() {
        for (url, shown) in [
            (
                "postgres://somna:hunter2@db:5432/agents",
                "postgres://somna:***@db:5432/agents",
            ),
            ("postgres://somna@db/agents", "postgres://somna@db/agents"),
            (
                "postgresql://u:p%40ss@h/d?sslmode=require&password=hunter2",
                "postgresql://u:***@h/d?sslmode=require&password=***",
            ),
            (
                "host=db user=somna password=hunter2 dbname=agents",
                "host=db user=somna password=*** dbname=agents",
            ),
            ("", ""),
        ] {
            let url = DbUrl::new(url);
            assert_eq!(url.redacted(), shown);
            assert_eq!(format!("{url}"), shown);
            assert!(!format!("{url:?}").contains("hunter2"));
            assert!(!serde_json::to_string(&url).unwrap().contains("hunter2"));
        }
    }

    #[test]
    fn credentials_are_found_apart_from_the_url() {
        let c = url_credentials("nats://somna:hunter2@127.0.0.1:4222/x").unwrap();
        assert_eq!((c.user, c.password), ("somna", "hunter2"));
        assert_eq!(c.bare_url(), "nats://127.0.0.1:4222/x");
        assert_eq!(url_credentials("nats://127.0.0.1:4222"), None);
        assert_eq!(url_credentials("nats://somna@127.0.0.1:4222"), None);
    }

    #[test]
    fn the_nats_url_never_shows_its_password_either() {
        let cluster = ClusterSection {
            nats_url: DbUrl::new("nats://somna:hunter2@127.0.0.1:4222"),
            ..ClusterSection::default()
        };
        assert_eq!(
            cluster.nats_url.expose(),
            "nats://somna:hunter2@127.0.0.1:4222"
        );
        assert!(format!("{cluster:?}").contains("nats://somna:***@127.0.0.1:4222"));
        assert!(!format!("{cluster:?}").contains("hunter2"));
        assert!(!serde_json::to_string(&cluster).unwrap().contains("hunter2"));
    }
}
