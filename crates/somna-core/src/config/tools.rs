//! Host-defined tools ([`ToolSpec`]) and how their JSON-schema parameters are read.

use serde::{Deserialize, Deserializer, Serialize};

/// A tool the host program defines; calls to it are handed to the host as events.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct ToolSpec {
    /// The name the model calls it by: 1–64 characters from `[A-Za-z0-9_-]`, not a builtin's name.
    #[cfg_attr(feature = "openapi", schema(pattern = "^[A-Za-z0-9_-]{1,64}$"))]
    pub name: String,
    /// What the tool does, for the model.
    #[serde(default)]
    pub description: String,
    /// JSON Schema of the arguments, as a JSON string. A file may also write it as a TOML table,
    /// which is converted to JSON.
    #[serde(
        default = "ToolSpec::default_parameters",
        deserialize_with = "parameters_as_json"
    )]
    #[cfg_attr(feature = "openapi", schema(value_type = ToolParametersSchema))]
    pub parameters: String,
}

impl ToolSpec {
    fn default_parameters() -> String {
        r#"{"type":"object","properties":{}}"#.to_string()
    }
}

/// The OpenAPI schema of [`ToolSpec::parameters`] (the API's document names it
/// `ToolParameters`): JSON text, or an object that is turned into it (what `parameters_as_json`
/// reads); it is always written as text.
#[cfg(feature = "openapi")]
#[derive(Debug)]
pub struct ToolParametersSchema;

#[cfg(feature = "openapi")]
impl utoipa::PartialSchema for ToolParametersSchema {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        use utoipa::openapi::schema::{ObjectBuilder, OneOfBuilder, Type};
        OneOfBuilder::new()
            .item(ObjectBuilder::new().schema_type(Type::String))
            .item(ObjectBuilder::new().schema_type(Type::Object))
            .description(Some(
                "The JSON Schema of the arguments: JSON text, or an object (read as its text); \
always written as text",
            ))
            .into()
    }
}

#[cfg(feature = "openapi")]
impl utoipa::ToSchema for ToolParametersSchema {
    fn name() -> std::borrow::Cow<'static, str> {
        "ToolParameters".into()
    }
}

/// Reads `parameters` as a JSON string, or as a table (TOML) / object (JSON) turned into one.
fn parameters_as_json<'de, D: Deserializer<'de>>(deserializer: D) -> Result<String, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Parameters {
        Text(String),
        Schema(serde_json::Value),
    }
    match Parameters::deserialize(deserializer)? {
        Parameters::Text(text) => Ok(text),
        Parameters::Schema(value) => Ok(value.to_string()),
    }
}
