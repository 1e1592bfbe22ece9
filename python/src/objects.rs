//! A document as Python objects (dicts, lists, str, int, float, bool,
//! None): exactly what `json.loads` of the JSON text kvcr writes for the
//! same value gives (the writer is serde_json's, docs/format.md §9.6), built
//! directly from the value (`kvcr_audit::api::Structured`) so nothing is
//! rendered or parsed back. python/tests/test_parity.py and test_gate.py
//! hold the two equal on every fixture, key order and types included.
//!
//! Each struct field name (and unit variant name) is a `&'static str` of
//! the crate's own types: its Python string is made once per process,
//! interned, and reused by every later call (docs/bench.md, issue #39 §3),
//! instead of a new string (its bytes decoded, its hash computed, then
//! freed with the document) per key per object. A field name is a constant
//! of the program: it cannot go stale.

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString};
use serde::ser::{self, Serialize};
use std::fmt;
use std::sync::Mutex;

/// Why a value could not be built (only kvcr's own types are built: a bug).
#[derive(Debug)]
pub struct BuildError(String);

impl fmt::Display for BuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for BuildError {}

impl ser::Error for BuildError {
    fn custom<T: fmt::Display>(msg: T) -> Self {
        BuildError(msg.to_string())
    }
}

impl From<PyErr> for BuildError {
    fn from(e: PyErr) -> Self {
        BuildError(e.to_string())
    }
}

type Result<T> = std::result::Result<T, BuildError>;

/// Slots of the name table, a power of two: several times the crate's
/// distinct field and variant names.
const SLOTS: usize = 1024;

/// One slot: a name's address and length, and its interned string.
type Slot = Option<(usize, usize, Py<PyString>)>;

/// The interned Python strings of the `&'static str` names seen so far,
/// each in the slot its address and length hash to (a `&'static str` never
/// moves nor changes; two equal names at two addresses are two entries,
/// both right). A direct-mapped cache: a hit is one index and a compare of
/// both words, so a slot never answers for another name; two names that
/// share a slot take turns (the newcomer is interned, which CPython answers
/// with the same string object, and replaces the other).
struct Names(Box<[Slot]>);

impl Names {
    fn new() -> Names {
        Names((0..SLOTS).map(|_| None).collect())
    }

    /// The slot of a name: its words mixed by a Fibonacci multiply, the
    /// top bits (the table is private: no attacker chooses the keys).
    fn slot(ptr: usize, len: usize) -> usize {
        let h = (ptr as u64 ^ (len as u64).rotate_right(16)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        (h >> (64 - SLOTS.trailing_zeros())) as usize & (SLOTS - 1)
    }

    fn get<'py>(&mut self, py: Python<'py>, s: &'static str) -> Bound<'py, PyString> {
        let (ptr, len) = (s.as_ptr() as usize, s.len());
        let slot = &mut self.0[Names::slot(ptr, len)];
        if let Some((p, l, v)) = slot {
            if (*p, *l) == (ptr, len) {
                return v.bind(py).clone();
            }
        }
        let v = PyString::intern(py, s);
        *slot = Some((ptr, len, v.clone().unbind()));
        v
    }
}

static NAMES: Mutex<Option<Names>> = Mutex::new(None);

/// `value` as Python objects (module docs).
pub fn build<'py, T: Serialize + ?Sized>(py: Python<'py>, value: &T) -> Result<Bound<'py, PyAny>> {
    // Never waited for: building objects can run Python code (a collection
    // calling a finaliser), which can switch threads or call back in here.
    // A call that finds the table taken builds its own for this document.
    // A panic while it was held leaves only a cache, still valid.
    let mut guard = match NAMES.try_lock() {
        Ok(g) => Some(g),
        Err(std::sync::TryLockError::Poisoned(p)) => Some(p.into_inner()),
        Err(std::sync::TryLockError::WouldBlock) => None,
    };
    let mut own = None;
    let names = match guard.as_deref_mut() {
        Some(table) => table.get_or_insert_with(Names::new),
        None => own.insert(Names::new()),
    };
    value.serialize(Builder { py, names })
}

struct Builder<'a, 'py> {
    py: Python<'py>,
    names: &'a mut Names,
}

impl<'py> Builder<'_, 'py> {
    fn name(&mut self, s: &'static str) -> Bound<'py, PyString> {
        self.names.get(self.py, s)
    }

    fn reborrow(&mut self) -> Builder<'_, 'py> {
        Builder {
            py: self.py,
            names: self.names,
        }
    }

    fn one_key(
        &mut self,
        variant: &'static str,
        v: Bound<'py, PyAny>,
    ) -> Result<Bound<'py, PyAny>> {
        let d = PyDict::new(self.py);
        d.set_item(self.name(variant), v)?;
        Ok(d.into_any())
    }
}

fn int<'py, T: IntoPyObject<'py>>(py: Python<'py>, v: T) -> Result<Bound<'py, PyAny>> {
    Ok(v.into_bound_py_any(py)?)
}

use pyo3::IntoPyObjectExt;

/// serde's ten integer methods of a serializer, each `$body` with the
/// serializer as `$s` and the number as `$v`.
macro_rules! numbers {
    (|$s:ident : $t:ty, $v:ident| $body:expr) => {
        numbers!(@ |$s: $t, $v| $body; serialize_i8 i8, serialize_i16 i16,
            serialize_i32 i32, serialize_i64 i64, serialize_i128 i128, serialize_u8 u8,
            serialize_u16 u16, serialize_u32 u32, serialize_u64 u64, serialize_u128 u128);
    };
    (@ |$s:ident : $t:ty, $v:ident| $body:expr; $($name:ident $n:ty),*) => {$(
        fn $name(self, $v: $n) -> Result<Self::Ok> {
            let $s: $t = self;
            $body
        }
    )*};
}

impl<'a, 'py> ser::Serializer for Builder<'a, 'py> {
    type Ok = Bound<'py, PyAny>;
    type Error = BuildError;
    type SerializeSeq = Seq<'a, 'py>;
    type SerializeTuple = Seq<'a, 'py>;
    type SerializeTupleStruct = Seq<'a, 'py>;
    type SerializeTupleVariant = Seq<'a, 'py>;
    type SerializeMap = Map<'a, 'py>;
    type SerializeStruct = Map<'a, 'py>;
    type SerializeStructVariant = Map<'a, 'py>;

    fn serialize_bool(self, v: bool) -> Result<Self::Ok> {
        int(self.py, v)
    }
    numbers!(|b: Builder<'a, 'py>, v| int(b.py, v));
    fn serialize_f32(self, v: f32) -> Result<Self::Ok> {
        self.serialize_f64(f64::from(v))
    }
    fn serialize_f64(self, v: f64) -> Result<Self::Ok> {
        // serde_json writes a number that is not finite as null.
        if v.is_finite() {
            int(self.py, v)
        } else {
            self.serialize_none()
        }
    }
    fn serialize_char(self, v: char) -> Result<Self::Ok> {
        self.serialize_str(v.encode_utf8(&mut [0u8; 4]))
    }
    fn serialize_str(self, v: &str) -> Result<Self::Ok> {
        Ok(PyString::new(self.py, v).into_any())
    }
    fn serialize_bytes(self, v: &[u8]) -> Result<Self::Ok> {
        // serde_json writes bytes as an array of numbers.
        Ok(PyList::new(self.py, v)?.into_any())
    }
    fn serialize_none(self) -> Result<Self::Ok> {
        Ok(self.py.None().into_bound(self.py))
    }
    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Result<Self::Ok> {
        value.serialize(self)
    }
    fn serialize_unit(self) -> Result<Self::Ok> {
        self.serialize_none()
    }
    fn serialize_unit_struct(self, _name: &'static str) -> Result<Self::Ok> {
        self.serialize_none()
    }
    fn serialize_unit_variant(
        mut self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
    ) -> Result<Self::Ok> {
        Ok(self.name(variant).into_any())
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        value: &T,
    ) -> Result<Self::Ok> {
        value.serialize(self)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        mut self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        value: &T,
    ) -> Result<Self::Ok> {
        let v = value.serialize(self.reborrow())?;
        self.one_key(variant, v)
    }
    fn serialize_seq(self, len: Option<usize>) -> Result<Seq<'a, 'py>> {
        Ok(Seq {
            b: self,
            items: Vec::with_capacity(len.unwrap_or(0)),
            variant: None,
        })
    }
    fn serialize_tuple(self, len: usize) -> Result<Seq<'a, 'py>> {
        self.serialize_seq(Some(len))
    }
    fn serialize_tuple_struct(self, _name: &'static str, len: usize) -> Result<Seq<'a, 'py>> {
        self.serialize_seq(Some(len))
    }
    fn serialize_tuple_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        len: usize,
    ) -> Result<Seq<'a, 'py>> {
        let mut s = self.serialize_seq(Some(len))?;
        s.variant = Some(variant);
        Ok(s)
    }
    fn serialize_map(self, _len: Option<usize>) -> Result<Map<'a, 'py>> {
        Ok(Map {
            dict: PyDict::new(self.py),
            b: self,
            key: None,
            variant: None,
        })
    }
    fn serialize_struct(self, _name: &'static str, _len: usize) -> Result<Map<'a, 'py>> {
        self.serialize_map(None)
    }
    fn serialize_struct_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        _len: usize,
    ) -> Result<Map<'a, 'py>> {
        let mut m = self.serialize_map(None)?;
        m.variant = Some(variant);
        Ok(m)
    }
}

/// A list being built (a sequence, a tuple: JSON has only arrays).
pub struct Seq<'a, 'py> {
    b: Builder<'a, 'py>,
    items: Vec<Bound<'py, PyAny>>,
    /// A tuple variant's name: the list is its one key's value.
    variant: Option<&'static str>,
}

impl<'py> Seq<'_, 'py> {
    fn push<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<()> {
        let v = value.serialize(self.b.reborrow())?;
        self.items.push(v);
        Ok(())
    }

    fn finish(mut self) -> Result<Bound<'py, PyAny>> {
        let list = PyList::new(self.b.py, self.items)?.into_any();
        match self.variant {
            Some(v) => self.b.one_key(v, list),
            None => Ok(list),
        }
    }
}

/// The four sequence traits of serde, each one list: `$method` takes the
/// next element.
macro_rules! list_traits {
    ($($trait:ident :: $method:ident),*) => {$(
        impl<'py> ser::$trait for Seq<'_, 'py> {
            type Ok = Bound<'py, PyAny>;
            type Error = BuildError;
            fn $method<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<()> {
                self.push(value)
            }
            fn end(self) -> Result<Self::Ok> {
                self.finish()
            }
        }
    )*};
}

list_traits!(
    SerializeSeq::serialize_element,
    SerializeTuple::serialize_element,
    SerializeTupleStruct::serialize_field,
    SerializeTupleVariant::serialize_field
);

/// A dict being built (a struct or a map).
pub struct Map<'a, 'py> {
    b: Builder<'a, 'py>,
    dict: Bound<'py, PyDict>,
    /// A map's key, until its value comes.
    key: Option<Bound<'py, PyAny>>,
    /// A struct variant's name: the dict is its one key's value.
    variant: Option<&'static str>,
}

impl<'py> Map<'_, 'py> {
    fn field<T: Serialize + ?Sized>(&mut self, key: &'static str, value: &T) -> Result<()> {
        let v = value.serialize(self.b.reborrow())?;
        let k = self.b.name(key);
        self.dict.set_item(k, v)?;
        Ok(())
    }

    fn finish(mut self) -> Result<Bound<'py, PyAny>> {
        let d = self.dict.into_any();
        match self.variant {
            Some(v) => self.b.one_key(v, d),
            None => Ok(d),
        }
    }
}

impl<'py> ser::SerializeMap for Map<'_, 'py> {
    type Ok = Bound<'py, PyAny>;
    type Error = BuildError;
    fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> Result<()> {
        self.key = Some(key.serialize(Key { py: self.b.py })?);
        Ok(())
    }
    fn serialize_value<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<()> {
        let k = self
            .key
            .take()
            .ok_or_else(|| BuildError("a map value without its key".into()))?;
        let v = value.serialize(self.b.reborrow())?;
        self.dict.set_item(k, v)?;
        Ok(())
    }
    fn end(self) -> Result<Self::Ok> {
        self.finish()
    }
}

/// serde's two struct traits, each one dict of named fields.
macro_rules! dict_traits {
    ($($trait:ident),*) => {$(
        impl<'py> ser::$trait for Map<'_, 'py> {
            type Ok = Bound<'py, PyAny>;
            type Error = BuildError;
            fn serialize_field<T: Serialize + ?Sized>(
                &mut self,
                key: &'static str,
                value: &T,
            ) -> Result<()> {
                self.field(key, value)
            }
            fn end(self) -> Result<Self::Ok> {
                self.finish()
            }
        }
    )*};
}

dict_traits!(SerializeStruct, SerializeStructVariant);

/// A map's key as serde_json writes it: a JSON object's key is a string,
/// so a string is itself and a number is its decimal text; anything else is
/// refused, as serde_json refuses it.
struct Key<'py> {
    py: Python<'py>,
}

fn not_a_key<T>() -> Result<T> {
    Err(BuildError("a map key must be a string or a number".into()))
}

impl<'py> ser::Serializer for Key<'py> {
    type Ok = Bound<'py, PyAny>;
    type Error = BuildError;
    type SerializeSeq = ser::Impossible<Bound<'py, PyAny>, BuildError>;
    type SerializeTuple = ser::Impossible<Bound<'py, PyAny>, BuildError>;
    type SerializeTupleStruct = ser::Impossible<Bound<'py, PyAny>, BuildError>;
    type SerializeTupleVariant = ser::Impossible<Bound<'py, PyAny>, BuildError>;
    type SerializeMap = ser::Impossible<Bound<'py, PyAny>, BuildError>;
    type SerializeStruct = ser::Impossible<Bound<'py, PyAny>, BuildError>;
    type SerializeStructVariant = ser::Impossible<Bound<'py, PyAny>, BuildError>;

    fn serialize_bool(self, v: bool) -> Result<Self::Ok> {
        Ok(PyString::new(self.py, if v { "true" } else { "false" }).into_any())
    }
    // A number key is its decimal text.
    numbers!(|k: Key<'py>, v| Ok(PyString::new(k.py, &v.to_string()).into_any()));
    fn serialize_f32(self, _v: f32) -> Result<Self::Ok> {
        not_a_key()
    }
    fn serialize_f64(self, _v: f64) -> Result<Self::Ok> {
        not_a_key()
    }
    fn serialize_char(self, v: char) -> Result<Self::Ok> {
        Ok(PyString::new(self.py, v.encode_utf8(&mut [0u8; 4])).into_any())
    }
    fn serialize_str(self, v: &str) -> Result<Self::Ok> {
        Ok(PyString::new(self.py, v).into_any())
    }
    fn serialize_bytes(self, _v: &[u8]) -> Result<Self::Ok> {
        not_a_key()
    }
    fn serialize_none(self) -> Result<Self::Ok> {
        not_a_key()
    }
    fn serialize_some<T: Serialize + ?Sized>(self, _value: &T) -> Result<Self::Ok> {
        not_a_key()
    }
    fn serialize_unit(self) -> Result<Self::Ok> {
        not_a_key()
    }
    fn serialize_unit_struct(self, _name: &'static str) -> Result<Self::Ok> {
        not_a_key()
    }
    fn serialize_unit_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
    ) -> Result<Self::Ok> {
        Ok(PyString::new(self.py, variant).into_any())
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        value: &T,
    ) -> Result<Self::Ok> {
        value.serialize(self)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        _index: u32,
        _variant: &'static str,
        _value: &T,
    ) -> Result<Self::Ok> {
        not_a_key()
    }
    fn serialize_seq(self, _len: Option<usize>) -> Result<Self::SerializeSeq> {
        not_a_key()
    }
    fn serialize_tuple(self, _len: usize) -> Result<Self::SerializeTuple> {
        not_a_key()
    }
    fn serialize_tuple_struct(
        self,
        _name: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeTupleStruct> {
        not_a_key()
    }
    fn serialize_tuple_variant(
        self,
        _name: &'static str,
        _index: u32,
        _variant: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeTupleVariant> {
        not_a_key()
    }
    fn serialize_map(self, _len: Option<usize>) -> Result<Self::SerializeMap> {
        not_a_key()
    }
    fn serialize_struct(self, _name: &'static str, _len: usize) -> Result<Self::SerializeStruct> {
        not_a_key()
    }
    fn serialize_struct_variant(
        self,
        _name: &'static str,
        _index: u32,
        _variant: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeStructVariant> {
        not_a_key()
    }
}
