//! Encoding: the inverse of the decoders, for writing images.
//!
//! * [`thrift`] — the thrift compact protocol;
//! * [`frozen`] — frozen2 layouts, schema and bit-packed data;
//! * [`metadata`] — [`Metadata`](crate::metadata::Metadata) to the
//!   METADATA_V2_SCHEMA and METADATA_V2 payloads, with DwarFS's packing
//!   options;
//! * [`history`] — the HISTORY payload.

pub mod frozen;
pub mod fsst;
pub mod history;
pub mod metadata;
pub mod thrift;

pub use frozen::FieldWidths;
pub use history::encode_history;
pub use metadata::{encode_metadata, EncodedMetadata, PackOptions};
