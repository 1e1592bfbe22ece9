//! One file per subcommand, its run function beside its arguments, and
//! [`settings`]: arguments, environment and profile resolved once.

pub mod profile;
pub mod seal;
pub mod settings;
