//! The plugin configuration document: sharing-affinity extractors for API servers without
//! `ResourceSlice.spec.sharingAffinity`, consolidation, and the binding timeout. It configures
//! the whole plugin; the extractors it lists are read by [`crate::affinity::Extractors::build`].

use serde::Deserialize;

use crate::affinity::validate_extractor;
use crate::cel::CelCache;
use crate::error::Error;
use crate::model::{DeviceSelector, Map};

/// The plugin configuration document.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Config {
    /// Extractors for API servers without `ResourceSlice.spec.sharingAffinity`.
    #[serde(default)]
    pub sharing_affinity: Vec<ConfigExtractor>,
    /// Prefer devices already locked to compatible values (default true). With false the plugin
    /// picks devices first-fit, as the KEP's alpha does, and Score ranks nodes only by the claims'
    /// `firstAvailable` lists, as upstream's DynamicResources does.
    #[serde(default = "yes")]
    pub consolidate: bool,
    /// How long an allocation may wait for its devices' binding conditions (KEP-5007) before
    /// the claim is unavailable and PostFilter may deallocate it: upstream's DynamicResources
    /// `bindingTimeout`, 600 seconds by default.
    #[serde(default = "binding_timeout")]
    pub binding_timeout_seconds: u64,
}

fn binding_timeout() -> u64 {
    600
}

/// The longest `bindingTimeoutSeconds`, a day: PreBind checks the binding conditions every
/// [`crate::binding::POLL_SECONDS`] for that long, and a replay host runs every check.
pub const MAX_BINDING_TIMEOUT: u64 = 86_400;

impl Default for Config {
    fn default() -> Self {
        Config {
            sharing_affinity: Vec::new(),
            consolidate: true,
            binding_timeout_seconds: binding_timeout(),
        }
    }
}

fn yes() -> bool {
    true
}

/// One configured extractor: the KEP shape plus a scope.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ConfigExtractor {
    /// Driver whose pools it applies to.
    pub driver: String,
    /// Pool it applies to; none = every pool of the driver.
    #[serde(default)]
    pub pool: Option<String>,
    /// Devices it applies to.
    #[serde(default)]
    pub selector: Option<DeviceSelector>,
    /// Key → CEL expression over `object`.
    pub cel: Map<String, String>,
}

impl Config {
    /// Parses and validates the configuration JSON; empty text means no configuration.
    pub fn from_json(text: &str) -> Result<Config, Error> {
        if text.trim().is_empty() {
            return Ok(Config::default());
        }
        let config: Config = crate::json::from_text(text).map_err(|e| {
            let path = if e.path.is_empty() { "." } else { &e.path };
            Error::Config(format!("field {path}: {}", e.error))
        })?;
        if !(1..=MAX_BINDING_TIMEOUT).contains(&config.binding_timeout_seconds) {
            return Err(Error::Config(format!(
                "field bindingTimeoutSeconds: {} is out of range (1 to {MAX_BINDING_TIMEOUT})",
                config.binding_timeout_seconds,
            )));
        }
        let cache = CelCache::new();
        for (i, ex) in config.sharing_affinity.iter().enumerate() {
            let at = format!("sharingAffinity[{i}]");
            if ex.driver.is_empty() {
                return Err(Error::Config(format!("{at}.driver: must be set")));
            }
            validate_extractor(&cache, &ex.cel, ex.selector.as_ref())
                .map_err(|e| Error::Config(format!("{at}.{e}")))?;
        }
        Ok(config)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_validation() {
        assert_eq!(Config::from_json("").unwrap(), Config::default());
        let err = Config::from_json(r#"{"sharingAffinity":[{"driver":"d","cel":{}}]}"#).unwrap_err();
        assert!(err.to_string().contains("sharingAffinity[0].cel"), "{err}");
        let err = Config::from_json(r#"{"sharingAfinity":[]}"#).unwrap_err();
        assert!(err.to_string().contains("unknown field"), "{err}");
        let err =
            Config::from_json(r#"{"sharingAffinity":[{"driver":"","cel":{"a":"\"x\""}}]}"#).unwrap_err();
        assert!(err.to_string().contains("driver"), "{err}");
        let nine: Map<String, String> = (0..9).map(|i| (format!("k{i}"), "\"x\"".to_string())).collect();
        let doc = serde_json::json!({"sharingAffinity":[{"driver":"d","cel":nine}]}).to_string();
        assert!(
            Config::from_json(&doc)
                .unwrap_err()
                .to_string()
                .contains("at most 8")
        );
        let err = Config::from_json(r#"{"sharingAffinity":[{"driver":"d","cel":{"bad-key":"\"x\""}}]}"#)
            .unwrap_err();
        assert!(err.to_string().contains("C identifier"), "{err}");
    }
}
