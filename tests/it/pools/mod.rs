//! `kvcr pools` (docs/format.md §16) on pool directories KVCR 0.1.1 wrote
//! (fixtures/pools/, recreated by [`kit`]) and on labelled mutations of them:
//! every finding code with its verdict, cause and exit status
//! ([`mutations`]); who holds a pool, with helper processes holding the
//! locks and the socket KVCR held ([`live`]); and never a side effect, under
//! strace ([`never`]).

mod fixtures;
mod kit;
mod live;
mod mutations;
mod never;
