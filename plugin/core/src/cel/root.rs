//! The variable an expression sees: `device` for selectors, `object` for extractors.

/// The variable an expression is evaluated against.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Root {
    /// Device selectors: `device`.
    Device,
    /// Sharing-affinity extractors: `object`.
    Object,
}

/// The fields of the `device` variable.
pub(crate) const DEVICE_FIELDS: [&str; 4] = ["driver", "attributes", "capacity", "allowMultipleAllocations"];

impl Root {
    /// The variable's name.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Root::Device => "device",
            Root::Object => "object",
        }
    }

    /// The variable's fields, when they are fixed (a device's); an object has any.
    pub(super) fn fields(self) -> Option<&'static [&'static str]> {
        match self {
            Root::Device => Some(&DEVICE_FIELDS),
            Root::Object => None,
        }
    }
}
