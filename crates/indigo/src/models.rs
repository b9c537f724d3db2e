//! The models trained here and committed with the source (`crates/indigo/models/`):
//! [`Trained`] (`pantheon-indigo-controller`'s, which the schemes run without candle), and
//! each as the candle network training starts from ([`policy`]).

pub use indigo_controller::models::Trained;

use crate::policy::{Policy, PolicyError};

/// Committed model `t` as the candle network. Errors only if the committed file were damaged
/// (a unit test loads both).
pub fn policy(t: Trained) -> Result<Policy, PolicyError> {
    Policy::from_bytes(t.bytes(), &t.what())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::FEATURES;
    use indigo_controller::frozen::Memory;

    #[test]
    fn the_candle_free_reader_gives_the_weights_candle_gives() {
        for t in Trained::ALL {
            let (by_candle, alone) = (policy(t).unwrap().freeze().unwrap(), t.frozen().unwrap());
            let (mut m1, mut m2) = (Memory::default(), Memory::default());
            for i in 0..40 {
                let x: [f32; FEATURES] = std::array::from_fn(|j| ((i * 7 + j) % 11) as f32 / 11.0);
                assert_eq!(
                    by_candle.step(&x, &mut m1),
                    alone.step(&x, &mut m2),
                    "{t:?}"
                );
            }
        }
    }
}
