//! A request body read with JSON Schema's types rather than serde's defaults, at any depth:
//! - a struct (or struct variant) is read from a JSON object only. serde's derived struct
//!   visitor also takes an array (fields by position), so `[null,null]` would pass for an
//!   object with two optional fields; every seed system validates its bodies as objects
//!   and refuses that.
//! - an integer field takes a number with no fractional part written as a float (`10.0`),
//!   as JSON Schema's `integer` and MoltNet's validator do (JavaScript cannot tell `10.0`
//!   from `10`); serde refuses any float for an integer.
//!
//! Every other shape (maps, `Value`, lists) is left to `T`: a `Value` keeps `10.0` as written.
//!
//! The watch follows the value down through options, lists, maps, newtypes and enums. It
//! cannot follow into what serde buffers first (`#[serde(flatten)]`, untagged and
//! internally tagged enums replay a buffered copy), so a struct reached only that way
//! still reads an array by position.

use std::fmt;

use serde::Deserialize;
use serde::de::{
    self, DeserializeSeed, Deserializer, EnumAccess, MapAccess, SeqAccess, Unexpected,
    VariantAccess, Visitor,
};

/// `T` read from a deserializer that never hands a struct a JSON array.
pub struct ObjectBody<T>(pub T);

impl<'de, T: Deserialize<'de>> Deserialize<'de> for ObjectBody<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        T::deserialize(Watch(deserializer)).map(ObjectBody)
    }
}

/// The inner deserializer, with every visitor it is given wrapped in [`Watched`] so that
/// the values below are read through `Watch` too.
struct Watch<D>(D);

macro_rules! watch_plain {
    ($($method:ident)*) => {
        $(
            fn $method<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, D::Error> {
                self.0.$method(Watched::values(visitor))
            }
        )*
    };
}

macro_rules! watch_integer {
    ($($method:ident)*) => {
        $(
            fn $method<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, D::Error> {
                self.0.$method(Watched::integer(visitor))
            }
        )*
    };
}

impl<'de, D: Deserializer<'de>> Deserializer<'de> for Watch<D> {
    type Error = D::Error;

    watch_plain! {
        deserialize_any deserialize_bool deserialize_f32 deserialize_f64 deserialize_char
        deserialize_str deserialize_string deserialize_bytes deserialize_byte_buf
        deserialize_option deserialize_unit deserialize_seq deserialize_map
        deserialize_identifier deserialize_ignored_any
    }

    watch_integer! {
        deserialize_i8 deserialize_i16 deserialize_i32 deserialize_i64 deserialize_i128
        deserialize_u8 deserialize_u16 deserialize_u32 deserialize_u64 deserialize_u128
    }

    fn deserialize_unit_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        self.0
            .deserialize_unit_struct(name, Watched::values(visitor))
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        self.0
            .deserialize_newtype_struct(name, Watched::values(visitor))
    }

    fn deserialize_tuple<V: Visitor<'de>>(
        self,
        len: usize,
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        self.0.deserialize_tuple(len, Watched::values(visitor))
    }

    fn deserialize_tuple_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        len: usize,
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        self.0
            .deserialize_tuple_struct(name, len, Watched::values(visitor))
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        self.0
            .deserialize_struct(name, fields, Watched::object(visitor))
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        name: &'static str,
        variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        self.0
            .deserialize_enum(name, variants, Watched::values(visitor))
    }

    fn is_human_readable(&self) -> bool {
        self.0.is_human_readable()
    }
}

/// A visitor that hands the inner one its nested values through [`Watch`]. For a struct it
/// also refuses a sequence, as the struct refuses a string or a number (`invalid type:
/// sequence, expected struct …`); for an integer it reads an integral float as the integer.
struct Watched<V> {
    inner: V,
    asked: Asked,
}

/// What the inner visitor was asked to read.
#[derive(Clone, Copy, PartialEq)]
enum Asked {
    Struct,
    Integer,
    Other,
}

impl<V> Watched<V> {
    fn values(inner: V) -> Self {
        Watched {
            inner,
            asked: Asked::Other,
        }
    }

    fn object(inner: V) -> Self {
        Watched {
            inner,
            asked: Asked::Struct,
        }
    }

    fn integer(inner: V) -> Self {
        Watched {
            inner,
            asked: Asked::Integer,
        }
    }
}

/// 2^64: the first float above every `u64` (`u64::MAX as f64` rounds up to it).
const TWO_POW_64: f64 = 18_446_744_073_709_551_616.0;

macro_rules! visit_plain {
    ($($method:ident($ty:ty))*) => {
        $(
            fn $method<E: de::Error>(self, value: $ty) -> Result<V::Value, E> {
                self.inner.$method(value)
            }
        )*
    };
}

impl<'de, V: Visitor<'de>> Visitor<'de> for Watched<V> {
    type Value = V::Value;

    fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
        self.inner.expecting(formatter)
    }

    visit_plain! {
        visit_bool(bool) visit_i8(i8) visit_i16(i16) visit_i32(i32) visit_i64(i64)
        visit_i128(i128) visit_u8(u8) visit_u16(u16) visit_u32(u32) visit_u64(u64)
        visit_u128(u128) visit_f32(f32) visit_char(char) visit_str(&str)
        visit_borrowed_str(&'de str) visit_string(String) visit_bytes(&[u8])
        visit_borrowed_bytes(&'de [u8]) visit_byte_buf(Vec<u8>)
    }

    fn visit_f64<E: de::Error>(self, value: f64) -> Result<V::Value, E> {
        if self.asked == Asked::Integer && value.fract() == 0.0 {
            // Exact: an integral float in these ranges converts without rounding.
            if (0.0..TWO_POW_64).contains(&value) {
                return self.inner.visit_u64(value as u64);
            }
            if (-TWO_POW_64 / 2.0..0.0).contains(&value) {
                return self.inner.visit_i64(value as i64);
            }
        }
        self.inner.visit_f64(value)
    }

    fn visit_none<E: de::Error>(self) -> Result<V::Value, E> {
        self.inner.visit_none()
    }

    fn visit_unit<E: de::Error>(self) -> Result<V::Value, E> {
        self.inner.visit_unit()
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<V::Value, D::Error> {
        self.inner.visit_some(Watch(deserializer))
    }

    fn visit_newtype_struct<D: Deserializer<'de>>(
        self,
        deserializer: D,
    ) -> Result<V::Value, D::Error> {
        self.inner.visit_newtype_struct(Watch(deserializer))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<V::Value, A::Error> {
        if self.asked == Asked::Struct {
            return Err(de::Error::invalid_type(Unexpected::Seq, &self));
        }
        self.inner.visit_seq(Watch(seq))
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<V::Value, A::Error> {
        self.inner.visit_map(Watch(map))
    }

    fn visit_enum<A: EnumAccess<'de>>(self, data: A) -> Result<V::Value, A::Error> {
        self.inner.visit_enum(Watch(data))
    }
}

/// A seed whose value is read through [`Watch`].
struct WatchSeed<S>(S);

impl<'de, S: DeserializeSeed<'de>> DeserializeSeed<'de> for WatchSeed<S> {
    type Value = S::Value;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<S::Value, D::Error> {
        self.0.deserialize(Watch(deserializer))
    }
}

impl<'de, A: SeqAccess<'de>> SeqAccess<'de> for Watch<A> {
    type Error = A::Error;

    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, A::Error> {
        self.0.next_element_seed(WatchSeed(seed))
    }

    fn size_hint(&self) -> Option<usize> {
        self.0.size_hint()
    }
}

impl<'de, A: MapAccess<'de>> MapAccess<'de> for Watch<A> {
    type Error = A::Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, A::Error> {
        self.0.next_key_seed(seed)
    }

    fn next_value_seed<S: DeserializeSeed<'de>>(&mut self, seed: S) -> Result<S::Value, A::Error> {
        self.0.next_value_seed(WatchSeed(seed))
    }

    fn size_hint(&self) -> Option<usize> {
        self.0.size_hint()
    }
}

impl<'de, A: EnumAccess<'de>> EnumAccess<'de> for Watch<A> {
    type Error = A::Error;
    type Variant = Watch<A::Variant>;

    fn variant_seed<S: DeserializeSeed<'de>>(
        self,
        seed: S,
    ) -> Result<(S::Value, Watch<A::Variant>), A::Error> {
        self.0
            .variant_seed(seed)
            .map(|(value, variant)| (value, Watch(variant)))
    }
}

impl<'de, A: VariantAccess<'de>> VariantAccess<'de> for Watch<A> {
    type Error = A::Error;

    fn unit_variant(self) -> Result<(), A::Error> {
        self.0.unit_variant()
    }

    fn newtype_variant_seed<S: DeserializeSeed<'de>>(self, seed: S) -> Result<S::Value, A::Error> {
        self.0.newtype_variant_seed(WatchSeed(seed))
    }

    fn tuple_variant<V: Visitor<'de>>(self, len: usize, visitor: V) -> Result<V::Value, A::Error> {
        self.0.tuple_variant(len, Watched::values(visitor))
    }

    fn struct_variant<V: Visitor<'de>>(
        self,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, A::Error> {
        self.0.struct_variant(fields, Watched::object(visitor))
    }
}
