//! Enums with a name per variant, written once: [`str_enum!`](crate::str_enum) declares the enum
//! with its `as_str`, `ALL`, `Display` and `FromStr`, whose error, [`UnknownName`], names the bad
//! value and lists the accepted names.

/// A name that is none of an enum's: what, which value, and the names accepted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown {kind} {value:?} (expected one of: {})", accepted.join(", "))]
pub struct UnknownName {
    /// What was named, e.g. `source type`.
    pub kind: &'static str,
    /// The name given.
    pub value: String,
    /// Every name accepted, in the enum's order.
    pub accepted: &'static [&'static str],
}

/// Declares a fieldless enum whose variants each have a name (serde attributes and derives pass
/// through unchanged), and gives it:
///
/// - `ALL`: every variant, in declaration order;
/// - `as_str(self) -> &'static str`: the variant's name;
/// - `Display` (the name) and `FromStr` (the name, or an alias given after `|`), whose error is
///   [`UnknownName`](crate::names::UnknownName).
///
/// ```
/// somna_core::str_enum! {
///     /// A season.
///     #[derive(Debug, Clone, Copy, PartialEq, Eq)]
///     pub enum Season as "season" {
///         Spring = "spring" | "springtime",
///         Winter = "winter",
///     }
/// }
/// assert_eq!(Season::ALL, [Season::Spring, Season::Winter]);
/// assert_eq!(Season::Winter.to_string(), "winter");
/// assert_eq!("springtime".parse::<Season>(), Ok(Season::Spring));
/// assert_eq!(
///     "autumn".parse::<Season>().unwrap_err().to_string(),
///     r#"unknown season "autumn" (expected one of: spring, winter)"#
/// );
/// ```
#[macro_export]
macro_rules! str_enum {
    (
        $(#[$meta:meta])*
        $vis:vis enum $name:ident as $kind:literal {
            $(
                $(#[$variant_meta:meta])*
                $variant:ident = $text:literal $(| $alias:literal)*
            ),+ $(,)?
        }
    ) => {
        $(#[$meta])*
        $vis enum $name {
            $(
                $(#[$variant_meta])*
                $variant,
            )+
        }

        impl $name {
            /// Every variant, in declaration order.
            pub const ALL: [$name; [$($text),+].len()] = [$($name::$variant),+];

            /// The variant's name (what `Display` writes and `FromStr` reads).
            pub fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $text,)+
                }
            }
        }

        impl ::std::fmt::Display for $name {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl ::std::str::FromStr for $name {
            type Err = $crate::names::UnknownName;

            fn from_str(s: &str) -> ::std::result::Result<Self, Self::Err> {
                match s {
                    $($text $(| $alias)* => Ok($name::$variant),)+
                    _ => Err($crate::names::UnknownName {
                        kind: $kind,
                        value: s.to_string(),
                        accepted: &[$($text),+],
                    }),
                }
            }
        }
    };
}
