//! The pickle machine behind PyTorch's state dict files: the opcodes `torch.save`
//! emits (protocol 2), the values a state dict builds, and the bounds that keep a
//! damaged or crafted pickle from exhausting the stack or memory. The file layouts
//! around the pickles (zip and legacy) are the parent module's.

use std::collections::HashMap;

use tch::Kind;

use super::{shown, StorageRef, TensorLayout};

/// How deep a pickle's containers may nest. A state dict needs five levels; cloning
/// and dropping a value recurse through it, so a crafted file of 100 000 nested lists
/// would otherwise overflow the stack.
const MAX_DEPTH: usize = 1000;

/// How many bytes of values a pickle may build per byte of it read so far, copies
/// included, beyond `BUILT_AT_START`. The fixture's data.pkl builds 32 (a value is
/// 48 bytes, and torch.save memoizes nearly every one, which copies it); no run of
/// opcodes builds more than about 50. The bound stops DUP or memo copies from
/// doubling a value at every opcode until memory runs out.
const BUILT_PER_BYTE: usize = 128;
const BUILT_AT_START: usize = 1 << 20;

/// The values a state dict's pickle builds.
#[derive(Clone, Debug)]
pub(super) enum Value {
    None,
    Int(i64),
    Bool(bool),
    // Floats and byte strings only pass through (they are not in a state dict's
    // tensors), so their values are not kept.
    Float,
    Str(String),
    Bytes,
    Tuple(Items),
    List(Items),
    /// Keys and values alternate.
    Dict(Items),
    /// A class or function named by module and name.
    Global(String, String),
    /// A storage referred to by key, from `persistent_load`.
    Storage(Box<StorageRef>),
    Tensor(Box<TensorLayout>),
    /// What the pickle stack keeps between MARK and the opcode that collects it.
    Mark,
}

impl Value {
    pub(super) fn describe(&self) -> String {
        match self {
            Value::None => "None".into(),
            Value::Bool(_) => "a boolean".into(),
            Value::Int(_) => "an integer".into(),
            Value::Float => "a float".into(),
            Value::Str(text) => format!("the string \"{}\"", shown(text)),
            Value::Bytes => "bytes".into(),
            Value::Tuple(_) => "a tuple".into(),
            Value::List(_) => "a list".into(),
            Value::Dict(_) => "a dict".into(),
            Value::Global(module, name) => shown(&format!("{module}.{name}")),
            Value::Storage(_) => "a storage".into(),
            Value::Tensor(_) => "a tensor".into(),
            Value::Mark => "a mark".into(),
        }
    }

    /// How many containers deep the value is: 0 for a number, 1 for an empty list.
    fn depth(&self) -> usize {
        match self {
            Value::Tuple(items) | Value::List(items) | Value::Dict(items) => items.depth + 1,
            _ => 0,
        }
    }

    /// About how many bytes of memory the value occupies, its contents included.
    fn footprint(&self) -> usize {
        std::mem::size_of::<Value>()
            + match self {
                Value::Str(text) => text.len(),
                Value::Global(module, name) => module.len() + name.len(),
                Value::Tuple(items) | Value::List(items) | Value::Dict(items) => items.footprint,
                Value::Storage(storage) => std::mem::size_of::<StorageRef>() + storage.key.len(),
                Value::Tensor(layout) => {
                    std::mem::size_of::<TensorLayout>()
                        + layout.storage.key.len()
                        + 8 * (layout.size.len() + layout.stride.len())
                }
                _ => 0,
            }
    }
}

/// The items of a tuple, list or dict, with their depth and footprint kept up to
/// date as they grow, so that bounding them costs nothing per opcode.
#[derive(Clone, Debug, Default)]
pub(super) struct Items {
    pub(super) values: Vec<Value>,
    /// The deepest item's `Value::depth`.
    depth: usize,
    /// The sum of the items' `Value::footprint`.
    footprint: usize,
}

impl Items {
    fn new(values: Vec<Value>) -> Result<Self, String> {
        let mut items = Items::default();
        items.values.reserve_exact(values.len());
        for value in values {
            items.push(value)?;
        }
        Ok(items)
    }

    fn push(&mut self, value: Value) -> Result<(), String> {
        let depth = value.depth();
        if depth >= MAX_DEPTH {
            return Err(format!("it nests containers more than {MAX_DEPTH} deep"));
        }
        self.depth = self.depth.max(depth);
        self.footprint += value.footprint();
        self.values.push(value);
        Ok(())
    }
}

/// What a pickle gives.
pub(super) struct Unpickled {
    pub(super) value: Value,
    /// Where its STOP opcode ended it, from its start.
    pub(super) length: usize,
    /// The storages its persistent ids describe, by key: their type and element
    /// count. PyTorch keeps a key's first description, and so do we.
    pub(super) storages: HashMap<String, (Kind, u64)>,
}

/// A pickle machine for the opcodes `torch.save` emits.
pub(super) struct Unpickler<'a> {
    bytes: &'a [u8],
    /// Which pickle this is, for messages ("data.pkl").
    name: &'static str,
    position: usize,
    stack: Vec<Value>,
    memo: HashMap<u32, Value>,
    /// Bytes of values built so far, copies included, against `BUILT_PER_BYTE`.
    built: usize,
    storages: HashMap<String, (Kind, u64)>,
}

impl<'a> Unpickler<'a> {
    pub(super) fn new(bytes: &'a [u8], name: &'static str) -> Self {
        Unpickler {
            bytes,
            name,
            position: 0,
            stack: Vec::new(),
            memo: HashMap::new(),
            built: 0,
            storages: HashMap::new(),
        }
    }

    fn malformed(&self, what: &str) -> String {
        format!("its {} is malformed ({what})", self.name)
    }

    fn take(&mut self, count: usize) -> Result<&'a [u8], String> {
        let bytes = self
            .position
            .checked_add(count)
            .and_then(|end| self.bytes.get(self.position..end))
            .ok_or_else(|| format!("its {} ends early", self.name))?;
        self.position += count;
        Ok(bytes)
    }

    fn byte(&mut self) -> Result<u8, String> {
        Ok(self.take(1)?[0])
    }

    fn u16(&mut self) -> Result<u16, String> {
        let bytes = self.take(2)?;
        Ok(u16::from_le_bytes([bytes[0], bytes[1]]))
    }

    fn u32(&mut self) -> Result<u32, String> {
        let bytes = self.take(4)?;
        Ok(u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]))
    }

    fn line(&mut self) -> Result<String, String> {
        let rest = &self.bytes[self.position..];
        let end = rest
            .iter()
            .position(|&byte| byte == b'\n')
            .ok_or_else(|| format!("its {} ends early", self.name))?;
        let text = String::from_utf8_lossy(&rest[..end]).into_owned();
        self.position += end + 1;
        Ok(text)
    }

    fn text(&mut self, length: usize) -> Result<String, String> {
        let bytes = self.take(length)?;
        String::from_utf8(bytes.to_vec())
            .map_err(|_| format!("its {} holds invalid UTF-8", self.name))
    }

    /// Counts `value` against what the pickle may build, then pushes it. Values made
    /// of popped ones (a tuple of the top three, say) are pushed directly: only their
    /// own node is new.
    fn push(&mut self, value: Value) -> Result<(), String> {
        self.charge(value.footprint())?;
        self.stack.push(value);
        Ok(())
    }

    fn charge(&mut self, bytes: usize) -> Result<(), String> {
        self.built = self.built.saturating_add(bytes);
        if self.built > BUILT_AT_START.saturating_add(BUILT_PER_BYTE.saturating_mul(self.position))
        {
            return Err(format!(
                "its {} copies values far beyond its own size (over {BUILT_PER_BYTE} bytes per byte)",
                self.name
            ));
        }
        Ok(())
    }

    /// Pushes a tuple, list or dict made of values taken off the stack.
    fn push_container(&mut self, container: Value) -> Result<(), String> {
        self.charge(std::mem::size_of::<Value>())?;
        self.stack.push(container);
        Ok(())
    }

    fn pop(&mut self) -> Result<Value, String> {
        self.stack.pop().ok_or_else(|| self.malformed("stack underflow"))
    }

    fn top(&mut self) -> Result<&mut Value, String> {
        let name = self.name;
        self.stack.last_mut().ok_or_else(|| format!("its {name} is malformed (empty stack)"))
    }

    /// Everything above the topmost mark, which is removed.
    fn pop_mark(&mut self) -> Result<Vec<Value>, String> {
        let mark = self
            .stack
            .iter()
            .rposition(|value| matches!(value, Value::Mark))
            .ok_or_else(|| self.malformed("no mark"))?;
        let items = self.stack.split_off(mark + 1);
        self.stack.pop();
        Ok(items)
    }

    fn memo_put(&mut self, index: u32) -> Result<(), String> {
        let value = self.top()?.clone();
        self.charge(value.footprint())?;
        self.memo.insert(index, value);
        Ok(())
    }

    fn memo_get(&mut self, index: u32) -> Result<(), String> {
        let value = self.memo.get(&index).cloned().ok_or_else(|| self.malformed("memo"))?;
        self.push(value)
    }

    /// Runs the pickle to its STOP opcode.
    pub(super) fn run(mut self) -> Result<Unpickled, String> {
        loop {
            let opcode = self.byte()?;
            match opcode {
                0x80 => {
                    self.byte()?; // PROTO: the version changes nothing below.
                }
                0x95 => {
                    self.take(8)?; // FRAME: a length hint.
                }
                b'.' => {
                    let value = self.pop()?;
                    return Ok(Unpickled {
                        value,
                        length: self.position,
                        storages: self.storages,
                    });
                }
                b'(' => self.push(Value::Mark)?,
                b'N' => self.push(Value::None)?,
                0x88 => self.push(Value::Bool(true))?,
                0x89 => self.push(Value::Bool(false))?,
                b'K' => {
                    let value = self.byte()?;
                    self.push(Value::Int(i64::from(value)))?;
                }
                b'M' => {
                    let value = self.u16()?;
                    self.push(Value::Int(i64::from(value)))?;
                }
                b'J' => {
                    let value = self.u32()? as i32;
                    self.push(Value::Int(i64::from(value)))?;
                }
                0x8a => {
                    let length = usize::from(self.byte()?);
                    let bytes = self.take(length)?;
                    if length > 8 {
                        return Err(format!("its {} holds an integer beyond 64 bits", self.name));
                    }
                    // Little-endian two's complement, sign-extended from its top byte.
                    let negative = bytes.last().is_some_and(|&top| top & 0x80 != 0);
                    let mut full = [if negative { 0xff } else { 0 }; 8];
                    full[..length].copy_from_slice(bytes);
                    self.push(Value::Int(i64::from_le_bytes(full)))?;
                }
                b'G' => {
                    self.take(8)?;
                    self.push(Value::Float)?;
                }
                b'X' => {
                    let length = self.u32()? as usize;
                    let text = self.text(length)?;
                    self.push(Value::Str(text))?;
                }
                0x8c => {
                    let length = usize::from(self.byte()?);
                    let text = self.text(length)?;
                    self.push(Value::Str(text))?;
                }
                b'U' | b'T' => {
                    // Python 2's str, in which its pickles name tensors and storages;
                    // PyTorch decodes it as text too.
                    let length = if opcode == b'U' {
                        usize::from(self.byte()?)
                    } else {
                        self.u32()? as usize
                    };
                    let bytes = self.take(length)?;
                    let value = match std::str::from_utf8(bytes) {
                        Ok(text) => Value::Str(text.to_string()),
                        Err(_) => Value::Bytes,
                    };
                    self.push(value)?;
                }
                b'C' => {
                    let length = usize::from(self.byte()?);
                    self.take(length)?;
                    self.push(Value::Bytes)?;
                }
                b'B' => {
                    let length = self.u32()? as usize;
                    self.take(length)?;
                    self.push(Value::Bytes)?;
                }
                b')' => self.push(Value::Tuple(Items::default()))?,
                b't' => {
                    let items = Items::new(self.pop_mark()?)?;
                    self.push_container(Value::Tuple(items))?;
                }
                0x85..=0x87 => {
                    let count = usize::from(opcode - 0x84);
                    if self.stack.len() < count {
                        return Err(self.malformed("short tuple"));
                    }
                    let items = Items::new(self.stack.split_off(self.stack.len() - count))?;
                    self.push_container(Value::Tuple(items))?;
                }
                b']' => self.push(Value::List(Items::default()))?,
                b'l' => {
                    let items = Items::new(self.pop_mark()?)?;
                    self.push_container(Value::List(items))?;
                }
                b'a' => {
                    let item = self.pop()?;
                    let name = self.name;
                    match self.top()? {
                        Value::List(items) => items.push(item)?,
                        other => return Err(format!("its {name} appends to {}", other.describe())),
                    }
                }
                b'e' => {
                    let new_items = self.pop_mark()?;
                    let name = self.name;
                    match self.top()? {
                        Value::List(items) => {
                            for item in new_items {
                                items.push(item)?;
                            }
                        }
                        other => return Err(format!("its {name} appends to {}", other.describe())),
                    }
                }
                b'}' => self.push(Value::Dict(Items::default()))?,
                b'd' => {
                    let items = self.pop_mark()?;
                    if items.len() % 2 != 0 {
                        return Err(self.malformed("odd dict items"));
                    }
                    let items = Items::new(items)?;
                    self.push_container(Value::Dict(items))?;
                }
                b's' => {
                    let value = self.pop()?;
                    let key = self.pop()?;
                    self.set_items(vec![key, value])?;
                }
                b'u' => {
                    let items = self.pop_mark()?;
                    if items.len() % 2 != 0 {
                        return Err(self.malformed("odd dict items"));
                    }
                    self.set_items(items)?;
                }
                b'c' => {
                    let module = self.line()?;
                    let name = self.line()?;
                    self.push(Value::Global(module, name))?;
                }
                0x93 => {
                    let name = self.pop()?;
                    let module = self.pop()?;
                    match (module, name) {
                        (Value::Str(module), Value::Str(name)) => {
                            self.push_container(Value::Global(module, name))?
                        }
                        _ => return Err(self.malformed("global")),
                    }
                }
                b'R' | 0x81 => {
                    let arguments = self.pop()?;
                    let callable = self.pop()?;
                    let value = self.reduce(callable, arguments)?;
                    self.push_container(value)?;
                }
                b'b' => {
                    // BUILD sets attributes, such as the state dict's `_metadata` of
                    // module versions, which a3g has no use for.
                    self.pop()?;
                }
                b'Q' => {
                    let id = self.pop()?;
                    let storage = self.persistent_load(id)?;
                    self.push(storage)?;
                }
                b'q' => {
                    let index = u32::from(self.byte()?);
                    self.memo_put(index)?;
                }
                b'r' => {
                    let index = self.u32()?;
                    self.memo_put(index)?;
                }
                0x94 => {
                    let index = self.memo.len() as u32;
                    self.memo_put(index)?;
                }
                b'h' => {
                    let index = u32::from(self.byte()?);
                    self.memo_get(index)?;
                }
                b'j' => {
                    let index = self.u32()?;
                    self.memo_get(index)?;
                }
                b'0' => {
                    self.pop()?;
                }
                b'1' => {
                    self.pop_mark()?;
                }
                b'2' => {
                    let value = self.top()?.clone();
                    self.push(value)?;
                }
                other => {
                    return Err(format!(
                        "its {} uses pickle opcode 0x{other:02x}, which torch.save does not write for a state dict",
                        self.name
                    ))
                }
            }
        }
    }

    /// SETITEM and SETITEMS: `items` are keys and values, alternating.
    fn set_items(&mut self, items: Vec<Value>) -> Result<(), String> {
        let name = self.name;
        match self.top()? {
            Value::Dict(entries) => {
                for item in items {
                    entries.push(item)?;
                }
                Ok(())
            }
            other => Err(format!("its {name} sets items on {}", other.describe())),
        }
    }

    /// Calls the globals a state dict names: the dict type and PyTorch's tensor
    /// rebuilders.
    fn reduce(&self, callable: Value, arguments: Value) -> Result<Value, String> {
        let Value::Global(module, name) = callable else {
            return Err(format!("its {} calls {}", self.name, callable.describe()));
        };
        let Value::Tuple(arguments) = arguments else {
            return Err(self.malformed("call arguments"));
        };
        let mut arguments = arguments.values.into_iter();
        match (module.as_str(), name.as_str()) {
            ("collections", "OrderedDict") => match arguments.next() {
                None => Ok(Value::Dict(Items::default())),
                // Python 2 pickles an OrderedDict as a call with its [key, value] pairs.
                Some(Value::List(pairs)) => {
                    let mut entries = Items::default();
                    for pair in pairs.values {
                        match pair {
                            Value::List(pair) | Value::Tuple(pair) if pair.values.len() == 2 => {
                                for item in pair.values {
                                    entries.push(item)?;
                                }
                            }
                            _ => return Err(self.malformed("OrderedDict items")),
                        }
                    }
                    Ok(Value::Dict(entries))
                }
                Some(_) => Err(self.malformed("OrderedDict items")),
            },
            // _rebuild_tensor (PyTorch before 0.4) takes the storage and its layout;
            // _rebuild_tensor_v2 adds requires_grad and hooks, which do not matter here.
            ("torch._utils", "_rebuild_tensor" | "_rebuild_tensor_v2") => {
                let (Some(storage), Some(offset), Some(size), Some(stride)) =
                    (arguments.next(), arguments.next(), arguments.next(), arguments.next())
                else {
                    return Err(self.malformed("tensor arguments"));
                };
                let Value::Storage(storage) = storage else {
                    return Err(format!("a tensor in its {} has no storage", self.name));
                };
                Ok(Value::Tensor(Box::new(TensorLayout {
                    storage: *storage,
                    offset: self.integer(&offset)?,
                    size: self.integers(&size)?,
                    stride: self.integers(&stride)?,
                })))
            }
            ("torch._utils", "_rebuild_parameter") => match arguments.next() {
                Some(tensor @ Value::Tensor(_)) => Ok(tensor),
                _ => Err(self.malformed("parameter arguments")),
            },
            _ => Err(format!(
                "its {} calls {}, which a state dict of tensors does not need",
                self.name,
                shown(&format!("{module}.{name}"))
            )),
        }
    }

    fn integer(&self, value: &Value) -> Result<i64, String> {
        match value {
            Value::Int(value) => Ok(*value),
            other => {
                Err(format!("its {} has {} where an integer belongs", self.name, other.describe()))
            }
        }
    }

    fn integers(&self, value: &Value) -> Result<Vec<i64>, String> {
        match value {
            Value::Tuple(items) => items.values.iter().map(|item| self.integer(item)).collect(),
            other => {
                Err(format!("its {} has {} where a shape belongs", self.name, other.describe()))
            }
        }
    }

    /// Resolves `('storage', torch.<Type>Storage, key, location, numel)`, to which the
    /// legacy format adds a view, `(view_key, offset, numel)` or None. The location (a
    /// GPU, say) does not matter, as every tensor is read onto the CPU.
    fn persistent_load(&mut self, id: Value) -> Result<Value, String> {
        let malformed = || format!("its {} refers to a storage it does not describe", self.name);
        let Value::Tuple(fields) = id else { return Err(malformed()) };
        let (tag, type_name, key, elements, view) = match fields.values.as_slice() {
            [Value::Str(tag), Value::Global(_, type_name), Value::Str(key), _, Value::Int(elements), rest @ ..] => {
                (tag, type_name, key, *elements, rest.first())
            }
            _ => return Err(malformed()),
        };
        if tag != "storage" {
            return Err(malformed());
        }
        let kind = match type_name.as_str() {
            "FloatStorage" => Kind::Float,
            "DoubleStorage" => Kind::Double,
            "HalfStorage" => Kind::Half,
            "BFloat16Storage" => Kind::BFloat16,
            "LongStorage" => Kind::Int64,
            "IntStorage" => Kind::Int,
            "ShortStorage" => Kind::Int16,
            "CharStorage" => Kind::Int8,
            "ByteStorage" => Kind::Uint8,
            "BoolStorage" => Kind::Bool,
            other => {
                return Err(format!(
                    "it stores tensors as {}, which is not supported",
                    shown(other)
                ))
            }
        };
        let count = |value: &Value| match value {
            Value::Int(count) => usize::try_from(*count).ok(),
            _ => None,
        };
        let view = match view {
            None | Some(Value::None) => None,
            Some(Value::Tuple(view)) => match view.values.as_slice() {
                [_, offset, elements] => Some((
                    count(offset).ok_or_else(malformed)?,
                    count(elements).ok_or_else(malformed)?,
                )),
                _ => return Err(malformed()),
            },
            Some(_) => return Err(malformed()),
        };
        let elements = u64::try_from(elements).map_err(|_| malformed())?;
        let storage = StorageRef { key: key.clone(), kind, view };
        if !self.storages.contains_key(key) {
            self.charge(key.len() + 32)?;
            self.storages.insert(key.clone(), (kind, elements));
        }
        Ok(Value::Storage(Box::new(storage)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs a pickle to its STOP.
    fn unpickle(bytes: &[u8]) -> Result<Value, String> {
        Unpickler::new(bytes, "data.pkl").run().map(|pickled| pickled.value)
    }

    /// LONG1 integers are little-endian two's complement of any width up to eight.
    #[test]
    fn long1_integers_sign_extend() {
        for (bytes, expected) in [
            (&b"\x8a\x01\xff."[..], -1i64),
            (&b"\x8a\x02\x00\x01."[..], 256),
            (&b"\x8a\x00."[..], 0),
            (&b"\x8a\x08\x00\x00\x00\x00\x00\x00\x00\x80."[..], i64::MIN),
        ] {
            match unpickle(bytes) {
                Ok(Value::Int(value)) => assert_eq!(value, expected, "{bytes:?}"),
                other => panic!("{bytes:?} gave {other:?}"),
            }
        }
    }

    /// Pickles nesting containers 100 000 deep are refused. Before, dropping the value
    /// overflowed the stack and aborted the process.
    #[test]
    fn deep_nesting_is_refused() {
        let count = 100_000;
        let lists = [vec![b']'; count], vec![b'a'; count - 1], vec![b'.']].concat();
        let marks = [vec![b'('; count], vec![b'l'; count], vec![b'.']].concat();
        let tuples = [vec![b'N'], vec![0x85; count], vec![b'.']].concat();
        for bytes in [lists, marks, tuples] {
            let message = unpickle(&bytes).unwrap_err();
            assert!(message.contains("more than 1000 deep"), "{message}");
        }
        let shallow = [vec![b'N'], vec![0x85; 999], vec![b'.']].concat();
        assert_eq!(unpickle(&shallow).unwrap().depth(), 999);
    }

    /// Pickles that double a value with every few opcodes (DUP, or a memo copy) are
    /// refused long before memory runs out. Before, 40 doublings exhausted it.
    #[test]
    fn memo_doubling_is_refused() {
        let dup = [b"]".to_vec(), b"2\x86".repeat(60), b".".to_vec()].concat();
        let memo =
            [b"]q\x00".to_vec(), b"h\x00h\x00\x86q\x000".repeat(60), b"h\x00.".to_vec()].concat();
        for bytes in [dup, memo] {
            let started = std::time::Instant::now();
            let message = unpickle(&bytes).unwrap_err();
            assert!(message.contains("copies values far beyond"), "{message}");
            assert!(started.elapsed().as_secs_f64() < 1.0);
        }
    }
}
