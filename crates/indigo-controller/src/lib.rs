//! Indigo at decision time (the Pantheon paper's §6), without an ML crate: what runs the
//! `indigo` and `indigo_nocalib` schemes in real time (`pantheon-quinn`) and in simulated time.
//! Training the policy (candle) is `pantheon-indigo`'s, which re-exports these modules.
//!
//! Every 10 ms Indigo reads a state vector — EWMAs of the queueing delay, the sending rate and
//! the delivery rate, the congestion window, the minimum RTT, the previous action ([`state`]) —
//! and a policy, a one-layer LSTM of 32 units with a softmax over five actions on the window
//! (÷2, −10, +0, +10, ×2 packets; [`frozen`]), picks one.
//!
//! - [`state`]: the state vector from a connection's events, the actions, the oracle's choice.
//! - [`frozen`]: the policy's weights as plain arrays, read from a model file (safetensors),
//!   and one decision.
//! - [`controller`]: the quinn-proto congestion controller that runs it.
//! - [`models`]: the models trained here and committed, which the schemes run.

pub mod controller;
pub mod frozen;
pub mod models;
pub mod state;
