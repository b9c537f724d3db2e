//! The models trained here and committed with the source (`crates/indigo/models/`), embedded
//! in the programs that run them: the `indigo` and `indigo_nocalib` schemes
//! (`pantheon-quinn --cc indigo|indigo-nocalib`, and in simulated time). How each was made —
//! the command, the training set, wall time, iterations, accuracy — is in
//! `crates/indigo/models/README.md`; `pantheon train indigo` makes them again.

use std::path::Path;
use std::sync::Arc;

use crate::controller::IndigoFactory;
use crate::frozen::{Frozen, ModelError};

/// A committed model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Trained {
    /// Trained on the 24 synthetic emulators and the calibrated emulators of real paths (seeds
    /// 000 and 001, the presets): the paper's `Indigo`.
    Indigo,
    /// Trained on the 24 synthetic emulators alone: the paper's `Indigo (uncalibrated)`.
    IndigoNocalib,
}

impl Trained {
    /// Both, in the order above.
    pub const ALL: [Trained; 2] = [Trained::Indigo, Trained::IndigoNocalib];

    /// `indigo` or `indigo_nocalib`: the scheme's name.
    pub fn name(self) -> &'static str {
        match self {
            Trained::Indigo => "indigo",
            Trained::IndigoNocalib => "indigo_nocalib",
        }
    }

    /// The model named `name` (see [`Trained::name`]); `None` for any other.
    pub fn from_name(name: &str) -> Option<Trained> {
        Trained::ALL.into_iter().find(|t| t.name() == name)
    }

    /// The model file's contents (safetensors).
    pub fn bytes(self) -> &'static [u8] {
        match self {
            Trained::Indigo => include_bytes!("../../indigo/models/indigo.safetensors"),
            Trained::IndigoNocalib => {
                include_bytes!("../../indigo/models/indigo_nocalib.safetensors")
            }
        }
    }

    /// What names the committed file in errors.
    pub fn what(self) -> String {
        format!(
            "the committed model crates/indigo/models/{}.safetensors",
            self.name()
        )
    }

    /// The policy at decision time. Errors only if the committed file were damaged (a unit
    /// test loads both).
    pub fn frozen(self) -> Result<Frozen, ModelError> {
        Frozen::from_safetensors(self.bytes(), &self.what())
    }

    /// The scheme's controller factory: this model, or the model file `model` instead (errors
    /// name a file that is not a model).
    pub fn factory(self, model: Option<&Path>) -> Result<IndigoFactory, ModelError> {
        let policy = match model {
            Some(path) => Frozen::load(path)?,
            None => self.frozen()?,
        };
        Ok(IndigoFactory::new(Arc::new(policy)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_committed_models_load_and_are_not_the_same() {
        for t in Trained::ALL {
            assert_eq!(Trained::from_name(t.name()), Some(t));
            t.frozen().unwrap();
        }
        assert_ne!(Trained::Indigo.bytes(), Trained::IndigoNocalib.bytes());
    }
}
