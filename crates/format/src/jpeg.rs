//! A JPEG decoder for the images DLIO writes: one 8-bit component (grayscale), sequential,
//! Huffman-coded, without restart intervals, which is what `PIL.Image.fromarray(uint8[h, w])
//! .save(f, "JPEG")` and our generator produce. Every other JPEG (colour, progressive, restart
//! markers, 12-bit, arithmetic coding, damaged data) makes [`GrayJpegDecoder::decode`] return
//! `None`, and the caller decodes it with zune-jpeg, which also reports the errors; a scan that
//! the end of the file cuts short is reported as [`Truncated`].
//!
//! Why a decoder of our own: DLIO's images are noise, so almost every one of the 64
//! coefficients of every block is coded (about 53 Huffman symbols per block of a 256x256
//! image at quality 75), and every sample of an `on_demand` run decodes its image again.
//! Decoding such an image costs zune-jpeg (the `image` crate's decoder) about 3.8 million
//! instructions and Pillow's libjpeg-turbo about 3.7 million (callgrind), about 80% of it in
//! Huffman decoding, a chain of dependent table lookups. This decoder shortens that chain and the work
//! around it:
//!
//! - the entropy-coded segment is copied once, without its stuffed zero bytes, into a buffer
//!   padded with zeros, so refilling the bit buffer is one unaligned 8-byte load from a
//!   fixed-size window, with no per-byte marker or bounds checks;
//! - one lookup on the next [`LOOKAHEAD`] bits yields a whole AC coefficient (zero run, value
//!   with its extra bits, bits used), and, when they fit in the lookahead too, the next one
//!   as well: two in three lookups of a noise image decode two coefficients. Longer codes
//!   take a canonical slow path;
//! - the tables are rebuilt only when an image defines different ones (DLIO's images all use
//!   the same standard tables), and all buffers live in the decoder, so a decode allocates
//!   nothing in steady state;
//! - the inverse DCT is a separable float transform, with SSE4.1 intrinsics where the CPU has
//!   them (a portable version, which the compiler vectorises, elsewhere; both give the same
//!   pixels).
//!
//! Every pixel is decoded; the result differs from libjpeg-turbo's integer IDCT by at most one
//! grey level on a pixel (JPEG allows decoders that latitude; the interop tests check it
//! against Pillow).

use memchr::memchr;

/// Bits looked up at once in the Huffman tables (a table has `1 << LOOKAHEAD` entries).
const LOOKAHEAD: u32 = 12;
/// Zero bytes after the entropy-coded data: more than the [`WINDOW`] of a block that starts at
/// the end of the data, so the decoder only checks for overruns between blocks.
const PADDING: usize = 512;

/// Table entry flag. An entry without it is a whole symbol: bits 0..6 the bits to consume
/// (code and value), bits 8..16 the zero run plus one ([`EOB_RUN`] for end-of-block), bits
/// 16..32 the value. An entry with it holds the code length in bits 0..6 and the symbol in
/// bits 8..16, or 0 there for codes longer than [`LOOKAHEAD`].
const SLOW: u32 = 1 << 7;
/// The "run plus one" of end-of-block (an AC symbol with size 0 and run below 15): enough to
/// carry any position past the end of the block.
const EOB_RUN: u32 = 128;
/// Fields of a two-symbol entry (`HuffmanTable::pairs`): bits 0..32 are the first symbol's
/// entry, except that bits 0..6 hold the bits both symbols use; then the first symbol's own
/// length, the second symbol's run plus one (0 when there is no second symbol) and its value.
const PAIR_LEN_SHIFT: u32 = 32;
const PAIR_RUN_SHIFT: u32 = 40;
const PAIR_VALUE_SHIFT: u32 = 48;
/// AC values take at most 10 bits in 8-bit images; larger sizes are refused, which bounds a
/// symbol to 16 + 10 bits.
const MAX_AC_SIZE: u32 = 10;

/// `UNZIGZAG_T[k]` is where the `k`th coefficient in zigzag order goes in a block stored
/// transposed (`block[u * 8 + v]` holds the coefficient of horizontal frequency `u` and
/// vertical frequency `v`), the layout [`idct`] wants.
const UNZIGZAG_T: [u8; 64] = {
    // Natural (row-major, v * 8 + u) index of each zigzag position.
    const NATURAL: [u8; 64] = [
        0, 1, 8, 16, 9, 2, 3, 10, 17, 24, 32, 25, 18, 11, 4, 5, 12, 19, 26, 33, 40, 48, 41, 34, 27,
        20, 13, 6, 7, 14, 21, 28, 35, 42, 49, 56, 57, 50, 43, 36, 29, 22, 15, 23, 30, 37, 44, 51,
        58, 59, 52, 45, 38, 31, 39, 46, 53, 60, 61, 54, 47, 55, 62, 63,
    ];
    let mut table = [0u8; 64];
    let mut k = 0;
    while k < 64 {
        let natural = NATURAL[k];
        table[k] = (natural % 8) * 8 + natural / 8;
        k += 1;
    }
    table
};

/// One Huffman table as a DHT segment defines it, and the lookup tables built from it.
struct HuffmanTable {
    /// True when the current image defined this slot.
    defined: bool,
    /// The last DHT definition seen for this slot: 16 code counts, then the symbols.
    spec: Vec<u8>,
    /// True when `lut` and the canonical arrays were built from `spec`.
    built: bool,
    /// One entry per value of the next [`LOOKAHEAD`] bits (see [`SLOW`]); allocated by the
    /// first `build`, so unused slots (and readers of other formats) cost no memory.
    lut: Option<Box<[u32; 1 << LOOKAHEAD]>>,
    /// For AC tables: the same lookup, extended with the symbol that follows when it fits in
    /// the lookahead too (see [`PAIR_RUN_SHIFT`]).
    pairs: Option<Box<[u64; 1 << LOOKAHEAD]>>,
    /// For codes longer than the lookahead: per length, the largest code of that length (-1
    /// when none) and what to add to a code to get its index in `symbols`.
    max_code: [i32; 17],
    offset: [i32; 17],
    symbols: [u8; 256],
}

impl HuffmanTable {
    fn new() -> HuffmanTable {
        HuffmanTable {
            defined: false,
            spec: Vec::new(),
            built: false,
            lut: None,
            pairs: None,
            max_code: [-1; 17],
            offset: [0; 17],
            symbols: [0; 256],
        }
    }

    /// Records a DHT definition (`counts` then `symbols`); keeps the built tables when the
    /// definition did not change.
    fn define(&mut self, spec: &[u8]) {
        self.defined = true;
        if self.spec != spec {
            self.spec.clear();
            self.spec.extend_from_slice(spec);
            self.built = false;
        }
    }

    /// Builds the lookup tables; false when the definition is not a valid prefix code.
    fn build(&mut self, dc: bool) -> bool {
        if !self.defined {
            return false;
        }
        if self.built {
            return true;
        }
        if self.spec.len() < 16 {
            return false;
        }
        let (counts, symbols) = self.spec.split_at(16);
        let total: usize = counts.iter().map(|&c| usize::from(c)).sum();
        if total != symbols.len() || total > 256 {
            return false;
        }
        self.symbols[..total].copy_from_slice(symbols);
        let lut = self
            .lut
            .get_or_insert_with(|| Box::new([SLOW; 1 << LOOKAHEAD]));
        lut.fill(SLOW);
        let mut code: u32 = 0;
        let mut index: usize = 0;
        for (len, &count) in (1..=16u32).zip(counts) {
            let first_index = index;
            let first_code = code;
            for _ in 0..count {
                if code >= 1 << len {
                    return false; // more codes than the length allows
                }
                if len <= LOOKAHEAD {
                    let symbol = u32::from(symbols[index]);
                    let shift = LOOKAHEAD - len;
                    for fill in 0..(1u32 << shift) {
                        let slot = (code << shift | fill) as usize;
                        lut[slot] = entry(symbol, len, fill, shift, dc);
                    }
                }
                code += 1;
                index += 1;
            }
            self.max_code[len as usize] = if count > 0 { code as i32 - 1 } else { -1 };
            self.offset[len as usize] = first_index as i32 - first_code as i32;
            code <<= 1;
        }
        if !dc {
            self.build_pairs();
        }
        self.built = true;
        true
    }

    /// Fills `pairs` from `lut`: where a whole symbol other than end-of-block leaves enough
    /// of the lookahead for the next whole symbol, the entry carries both.
    fn build_pairs(&mut self) {
        let Some(lut) = self.lut.as_deref() else {
            return;
        };
        let pairs = self
            .pairs
            .get_or_insert_with(|| Box::new([u64::from(SLOW); 1 << LOOKAHEAD]));
        for (slot, pair) in pairs.iter_mut().enumerate() {
            let first = lut[slot];
            let first_len = first & 63;
            *pair = u64::from(first) | u64::from(first_len) << PAIR_LEN_SHIFT;
            if first & SLOW != 0 || (first >> 8) & 0xFF == EOB_RUN {
                continue;
            }
            // The bits after the first symbol, padded with zeros: the entry there describes
            // the next symbol if it is no longer than the bits that are really there.
            let rest = (slot << first_len) & ((1 << LOOKAHEAD) - 1);
            let second = lut[rest];
            let second_len = second & 63;
            if second & SLOW != 0 || first_len + second_len > LOOKAHEAD {
                continue;
            }
            let run_1 = u64::from((second >> 8) & 0xFF);
            let value = u64::from(second >> 16);
            *pair = (*pair & !63)
                | u64::from(first_len + second_len)
                | run_1 << PAIR_RUN_SHIFT
                | value << PAIR_VALUE_SHIFT;
        }
    }
}

/// The table entry of `symbol` (code length `len`) for a slot whose `shift` bits after the
/// code are `fill`: a whole coefficient when the code and its value bits fit in the lookahead,
/// otherwise the code length and symbol with [`SLOW`].
fn entry(symbol: u32, len: u32, fill: u32, shift: u32, dc: bool) -> u32 {
    let (run, size) = if dc {
        (0, symbol)
    } else {
        (symbol >> 4, symbol & 15)
    };
    if size > shift {
        return SLOW | symbol << 8 | len;
    }
    if size == 0 {
        let run_1 = if dc || run == 15 { run + 1 } else { EOB_RUN };
        return run_1 << 8 | len;
    }
    let bits = fill >> (shift - size);
    let value = extend(bits, size);
    (value as u32) << 16 | (run + 1) << 8 | (len + size)
}

/// The signed value of `size` extra bits `bits` (JPEG's EXTEND).
#[inline(always)]
fn extend(bits: u32, size: u32) -> i32 {
    if bits < 1 << (size - 1) {
        bits as i32 - (1 << size) + 1
    } else {
        bits as i32
    }
}

/// Decodes the symbol at the top of `buf` (at least 27 valid bits) with the slow path: returns
/// the bits to consume, the zero run plus one ([`EOB_RUN`] for end-of-block) and the value, or
/// `None` for an invalid code or a value too large for an 8-bit image.
#[cold]
fn decode_slow(table: &HuffmanTable, entry: u32, buf: u64, dc: bool) -> Option<(u32, u32, i32)> {
    let (symbol, len) = if entry & 63 != 0 {
        ((entry >> 8) & 0xFF, entry & 63)
    } else {
        let peek = (buf >> 48) as u32;
        let mut found = None;
        for len in LOOKAHEAD + 1..=16 {
            let code = (peek >> (16 - len)) as i32;
            if code <= table.max_code[len as usize] {
                let index = usize::try_from(code + table.offset[len as usize]).ok()?;
                found = Some((u32::from(*table.symbols.get(index)?), len));
                break;
            }
        }
        found?
    };
    let (run, size) = if dc {
        (0, symbol)
    } else {
        (symbol >> 4, symbol & 15)
    };
    if size > if dc { MAX_AC_SIZE + 1 } else { MAX_AC_SIZE } {
        return None;
    }
    if size == 0 {
        let run_1 = if dc || run == 15 { run + 1 } else { EOB_RUN };
        return Some((len, run_1, 0));
    }
    let bits = ((buf << len) >> (64 - size)) as u32;
    Some((len + size, run + 1, extend(bits, size)))
}

/// Bytes of the scan one block can touch: 63 AC symbols of at most 26 bits and a DC symbol of
/// at most 27 bits are under 210 bytes, plus the 8 bytes a refill loads.
const WINDOW: usize = 256 + 8;

/// The bit reader over the unstuffed scan. `buf` holds the next bits MSB first, the top
/// `count` of them claimed. Within a block, bytes are loaded from a fixed-size window of the
/// scan, so the loads need no bounds checks: `pos` is the next byte to load, relative to the
/// window's start `base`.
#[derive(Clone, Copy)]
struct Bits {
    buf: u64,
    count: u32,
    base: usize,
    pos: usize,
}

impl Bits {
    /// Moves the window to where the next block starts; `None` past the end of the padding
    /// (which the overrun check between blocks prevents).
    #[inline(always)]
    fn window<'a>(&mut self, data: &'a [u8]) -> Option<&'a [u8; WINDOW]> {
        self.base += self.pos;
        self.pos = 0;
        data.get(self.base..)?.first_chunk::<WINDOW>()
    }

    /// Tops the buffer up to at least 56 bits. The bytes past `count` that the load also
    /// brings in are the stream's next bits, so OR-ing them in again later is harmless. The
    /// load's address depends only on the previous refill, so the CPU issues it early.
    #[inline(always)]
    fn refill(&mut self, window: &[u8; WINDOW]) {
        let at = self.pos & 255;
        let word = u64::from_be_bytes(window[at..at + 8].try_into().unwrap_or_default());
        self.buf |= word >> self.count;
        self.pos += ((63 - self.count) >> 3) as usize;
        self.count |= 56;
    }

    /// Drops the `entry & 63` bits a table entry (or slow-path result) says were used.
    #[inline(always)]
    fn consume(&mut self, entry: u32) {
        self.buf = self.buf.wrapping_shl(entry);
        self.count -= entry & 63;
    }

    /// Bits consumed since the start of the scan.
    fn consumed(&self) -> usize {
        (self.base + self.pos) * 8 - self.count as usize
    }
}

/// A grayscale baseline JPEG decoder; one per reader thread, reused across images.
pub(crate) struct GrayJpegDecoder {
    /// The current scan's entropy-coded bytes without byte stuffing, then [`PADDING`] zeros.
    scan: Vec<u8>,
    /// Quantization tables in zigzag order (`None`: not defined or 16-bit).
    quant: [Option<[u16; 64]>; 4],
    dc: [HuffmanTable; 4],
    ac: [HuffmanTable; 4],
    /// True when the CPU has SSE4.1, for the vectorised inverse DCT (tests turn it off to
    /// check the portable one).
    #[cfg(target_arch = "x86_64")]
    sse41: bool,
}

/// What the frame header (SOF) says.
struct Frame {
    width: usize,
    height: usize,
    component: u8,
    quant_table: usize,
}

impl GrayJpegDecoder {
    pub(crate) fn new() -> GrayJpegDecoder {
        GrayJpegDecoder {
            scan: Vec::new(),
            quant: [None; 4],
            dc: std::array::from_fn(|_| HuffmanTable::new()),
            ac: std::array::from_fn(|_| HuffmanTable::new()),
            #[cfg(target_arch = "x86_64")]
            sse41: std::arch::is_x86_feature_detected!("sse4.1"),
        }
    }

    /// Decodes `jpeg` into `pixels` (resized to width x height, row-major) and returns
    /// `Some((width, height))`; `None` when the image is not a grayscale baseline JPEG without
    /// restart intervals, or is damaged (the caller then uses a general decoder, which also
    /// reports errors); [`Truncated`] when the file ends inside the image data, which Pillow
    /// refuses too. `pixels` may hold garbage unless the result is `Some`.
    pub(crate) fn decode(
        &mut self,
        jpeg: &[u8],
        pixels: &mut Vec<u8>,
    ) -> Result<Option<(usize, usize)>, Truncated> {
        self.decode_file(jpeg, pixels).transpose()
    }

    /// [`GrayJpegDecoder::decode`], with `?` for the cases a general decoder should handle.
    fn decode_file(
        &mut self,
        jpeg: &[u8],
        pixels: &mut Vec<u8>,
    ) -> Option<Result<(usize, usize), Truncated>> {
        for table in &mut self.quant {
            *table = None;
        }
        for table in self.dc.iter_mut().chain(&mut self.ac) {
            table.defined = false;
        }
        if jpeg.get(..2)? != [0xFF, 0xD8] {
            return None;
        }
        let mut at = 2;
        let mut frame = None;
        loop {
            // A marker: 0xFF, optional 0xFF fill bytes, the code.
            if *jpeg.get(at)? != 0xFF {
                return None;
            }
            while *jpeg.get(at)? == 0xFF {
                at += 1;
            }
            let code = jpeg[at];
            at += 1;
            let len = usize::from(u16::from_be_bytes([*jpeg.get(at)?, *jpeg.get(at + 1)?]));
            let segment = jpeg.get(at + 2..at.checked_add(len)?)?;
            at += len;
            match code {
                0xE0..=0xEF | 0xFE => {}                    // APPn, COM
                0xDB => self.define_quant(segment)?,        // DQT
                0xC4 => self.define_huffman(segment)?,      // DHT
                0xC0 | 0xC1 => frame = Some(sof(segment)?), // baseline, extended sequential
                0xDD if segment.get(..2)? == [0, 0] => {}   // DRI with no restarts
                0xDA => {
                    let frame = frame.as_ref()?;
                    let (dc, ac) = sos(segment, frame)?;
                    return self.decode_scan(&jpeg[at..], frame, dc, ac, pixels);
                }
                _ => return None, // progressive, arithmetic, restarts, DNL, ...
            }
        }
    }

    fn define_quant(&mut self, mut segment: &[u8]) -> Option<()> {
        while let Some((&pq_tq, rest)) = segment.split_first() {
            let (precision, slot) = (pq_tq >> 4, usize::from(pq_tq & 15));
            if slot > 3 {
                return None;
            }
            if precision != 0 {
                // 16-bit tables belong to 12-bit images.
                self.quant[slot] = None;
                segment = rest.get(128..)?;
                continue;
            }
            let values = rest.get(..64)?;
            let mut table = [0u16; 64];
            for (to, &from) in table.iter_mut().zip(values) {
                *to = u16::from(from);
            }
            self.quant[slot] = Some(table);
            segment = &rest[64..];
        }
        Some(())
    }

    fn define_huffman(&mut self, mut segment: &[u8]) -> Option<()> {
        while let Some((&tc_th, rest)) = segment.split_first() {
            let (class, slot) = (tc_th >> 4, usize::from(tc_th & 15));
            let counts = rest.get(..16)?;
            let total: usize = counts.iter().map(|&c| usize::from(c)).sum();
            let spec = rest.get(..16 + total)?;
            match (class, slot) {
                (0, 0..=3) => self.dc[slot].define(spec),
                (1, 0..=3) => self.ac[slot].define(spec),
                _ => return None,
            }
            segment = &rest[16 + total..];
        }
        Some(())
    }

    /// Decodes the scan that starts at `data` (right after the SOS segment).
    fn decode_scan(
        &mut self,
        data: &[u8],
        frame: &Frame,
        dc_slot: usize,
        ac_slot: usize,
        pixels: &mut Vec<u8>,
    ) -> Option<Result<(usize, usize), Truncated>> {
        let quant = self.quant[frame.quant_table].as_ref()?;
        if !self.dc[dc_slot].build(true) || !self.ac[ac_slot].build(false) {
            return None;
        }
        // Dequantization happens in the IDCT, eight coefficients at a time.
        let mut dequant = [0f32; 64];
        for (&to, &q) in UNZIGZAG_T.iter().zip(quant) {
            dequant[usize::from(to)] = f32::from(q);
        }
        let (coded, terminated) = unstuff(data, &mut self.scan);
        let (width, height) = (frame.width, frame.height);
        let len = width.checked_mul(height)?;
        // Every 8x8 block takes at least two bits (a DC code and an end-of-block code): a
        // frame its scan cannot fill is refused before its pixels are allocated, so a
        // damaged header cannot ask for gigabytes. The outcome is the one the block loop
        // would reach when the data runs out.
        let blocks = width.div_ceil(8).checked_mul(height.div_ceil(8))?;
        if blocks.saturating_mul(2) > coded.saturating_mul(8) {
            return if terminated {
                None
            } else {
                Some(Err(Truncated))
            };
        }
        pixels.resize(len, 0);
        let scan = Scan {
            data: &self.scan,
            coded_bits: coded * 8,
            dc: &self.dc[dc_slot],
            ac: &self.ac[ac_slot],
            dequant: &dequant,
            width,
            height,
        };
        #[cfg(target_arch = "x86_64")]
        let decoded = if self.sse41 {
            // SAFETY: `decode_blocks_sse41` only needs the CPU to support SSE4.1, and `sse41`
            // is true only when `is_x86_feature_detected!` said so (in `new`); it is
            // otherwise an ordinary safe function.
            unsafe { decode_blocks_sse41(&scan, pixels) }
        } else {
            decode_blocks(&scan, pixels, idct)
        };
        #[cfg(not(target_arch = "x86_64"))]
        let decoded = decode_blocks(&scan, pixels, idct);
        match decoded {
            Some(()) => Some(Ok((width, height))),
            // The data ran out: truncated if no marker ended it, otherwise damaged.
            None if !terminated => Some(Err(Truncated)),
            None => None,
        }
    }
}

/// Everything the block loop reads.
struct Scan<'a> {
    /// Unstuffed entropy-coded bytes, then [`PADDING`] zeros.
    data: &'a [u8],
    /// Bits of coded data in `data` (before the padding).
    coded_bits: usize,
    dc: &'a HuffmanTable,
    ac: &'a HuffmanTable,
    /// Quantization steps in the block layout (transposed natural order).
    dequant: &'a [f32; 64],
    width: usize,
    height: usize,
}

/// [`decode_blocks`] with the SSE4.1 inverse DCT ([`sse41::idct`]), for CPUs that have it.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "sse4.1")]
fn decode_blocks_sse41(scan: &Scan<'_>, pixels: &mut [u8]) -> Option<()> {
    decode_blocks(scan, pixels, |block, dequant| sse41::idct(block, dequant))
}

/// Decodes every block of the scan and writes its pixels, inverse-transformed by `idct`;
/// `None` on invalid or truncated data.
#[inline(always)]
fn decode_blocks(
    scan: &Scan<'_>,
    pixels: &mut [u8],
    idct: impl Fn(&[i32; 64], &[f32; 64]) -> [[u8; 8]; 8],
) -> Option<()> {
    // `build` allocated both tables.
    let (dc_lut, pairs) = (scan.dc.lut.as_deref()?, scan.ac.pairs.as_deref()?);
    let mut bits = Bits {
        buf: 0,
        count: 0,
        base: 0,
        pos: 0,
    };
    let mut dc_pred: i32 = 0;
    let mut block = [0i32; 64];
    for block_y in 0..scan.height.div_ceil(8) {
        for block_x in 0..scan.width.div_ceil(8) {
            let window = bits.window(scan.data)?;
            block.fill(0);
            // DC: a difference from the previous block's.
            bits.refill(window);
            let entry = dc_lut[(bits.buf >> (64 - LOOKAHEAD)) as usize];
            let (used, diff) = if entry & SLOW == 0 {
                (entry, entry as i32 >> 16)
            } else {
                let (used, _, diff) = decode_slow(scan.dc, entry, bits.buf, true)?;
                (used, diff)
            };
            bits.consume(used);
            dc_pred = dc_pred.wrapping_add(diff);
            block[0] = dc_pred;
            // AC: (zero run, value) symbols until the block is full or ends early, up to two
            // per lookup. `k` is one past the zigzag position of the last coefficient. A
            // refill leaves at least 56 bits and a lookup takes at most 26, so one refill
            // serves two lookups.
            let mut k: usize = 1;
            'block: loop {
                bits.refill(window);
                for _ in 0..2 {
                    let entry = pairs[(bits.buf >> (64 - LOOKAHEAD)) as usize];
                    if entry & u64::from(SLOW) != 0 {
                        let (used, run_1, value) =
                            decode_slow(scan.ac, entry as u32, bits.buf, false)?;
                        bits.consume(used);
                        k += run_1 as usize;
                        if k >= 64 {
                            if k == 64 {
                                block[usize::from(UNZIGZAG_T[63])] = value;
                                break 'block;
                            }
                            if run_1 == EOB_RUN {
                                break 'block;
                            }
                            return None; // the run goes past the end of the block
                        }
                        block[usize::from(UNZIGZAG_T[k - 1]) & 63] = value;
                        continue;
                    }
                    // One or two whole symbols. Without a second symbol, its run is 0 and
                    // its value 0, and storing the first value last overwrites that store.
                    let first = k + ((entry >> 8) & 0xFF) as usize;
                    let second = first + ((entry >> PAIR_RUN_SHIFT) & 0xFF) as usize;
                    let first_value = (entry as u32 as i32) >> 16;
                    let second_value = (entry as i64 >> PAIR_VALUE_SHIFT) as i32;
                    if second >= 64 {
                        // The block ends here, or the data is bad.
                        if first > 64 {
                            if (entry >> 8) & 0xFF == u64::from(EOB_RUN) {
                                bits.consume((entry >> PAIR_LEN_SHIFT) as u32);
                                break 'block;
                            }
                            return None;
                        }
                        block[usize::from(UNZIGZAG_T[first - 1]) & 63] = first_value;
                        if first == 64 {
                            // The second symbol belongs to the next block.
                            bits.consume((entry >> PAIR_LEN_SHIFT) as u32);
                            break 'block;
                        }
                        bits.consume(entry as u32);
                        if second == 64 {
                            block[usize::from(UNZIGZAG_T[63])] = second_value;
                            break 'block;
                        }
                        if (entry >> PAIR_RUN_SHIFT) & 0xFF == u64::from(EOB_RUN) {
                            break 'block;
                        }
                        return None;
                    }
                    block[usize::from(UNZIGZAG_T[second - 1]) & 63] = second_value;
                    block[usize::from(UNZIGZAG_T[(first - 1) & 63]) & 63] = first_value;
                    bits.consume(entry as u32);
                    k = second;
                }
            }
            if bits.consumed() > scan.coded_bits {
                return None; // ran past the end of the data: truncated or damaged
            }
            let lines = idct(&block, scan.dequant);
            store(&lines, scan, pixels, block_x * 8, block_y * 8);
        }
    }
    Some(())
}

/// Parses a SOF0/SOF1 segment; `None` unless it is one 8-bit component.
fn sof(segment: &[u8]) -> Option<Frame> {
    let [
        precision,
        h1,
        h0,
        w1,
        w0,
        components,
        id,
        _sampling,
        quant_table,
        ..,
    ] = *segment
    else {
        return None;
    };
    let height = usize::from(u16::from_be_bytes([h1, h0]));
    let width = usize::from(u16::from_be_bytes([w1, w0]));
    // A single-component frame is decoded block by block whatever its sampling factors
    // (T.81 A.2.2); zero height needs a DNL marker.
    if precision != 8 || components != 1 || width == 0 || height == 0 || quant_table > 3 {
        return None;
    }
    Some(Frame {
        width,
        height,
        component: id,
        quant_table: usize::from(quant_table),
    })
}

/// Parses a SOS segment for the frame's one component; returns its DC and AC table slots.
fn sos(segment: &[u8], frame: &Frame) -> Option<(usize, usize)> {
    let [1, id, tables, 0, 63, 0] = *segment else {
        return None; // more than one component, or a progressive / lossless scan
    };
    let (dc, ac) = (usize::from(tables >> 4), usize::from(tables & 15));
    (id == frame.component && dc <= 3 && ac <= 3).then_some((dc, ac))
}

/// Copies the entropy-coded bytes at the start of `data` into `scan` without their stuffed
/// zero bytes (0xFF 0x00 -> 0xFF), up to the first marker, then appends [`PADDING`] zeros.
/// Returns the number of coded bytes and whether a marker ended them (false: the file ended).
fn unstuff(data: &[u8], scan: &mut Vec<u8>) -> (usize, bool) {
    scan.clear();
    let mut rest = data;
    let mut terminated = false;
    while let Some(at) = memchr(0xFF, rest) {
        scan.extend_from_slice(&rest[..=at]);
        match rest.get(at + 1) {
            Some(0) => rest = &rest[at + 2..],
            next => {
                // A marker (or fill bytes before one) ends the scan; a 0xFF that is the last
                // byte of the file does not.
                scan.pop();
                terminated = next.is_some();
                rest = &[];
                break;
            }
        }
    }
    scan.extend_from_slice(rest);
    let coded = scan.len();
    scan.resize(coded + PADDING, 0);
    (coded, terminated)
}

/// The file ends inside its image data.
#[derive(Debug, thiserror::Error)]
#[error("the file ends inside its image data (it is truncated)")]
pub(crate) struct Truncated;

/// `cos(k·π/16) / 2`, the 1-D IDCT's constants (the 1/2 is the transform's scale; `C[4]`
/// also serves the DC term, whose weight `1/(2√2)` equals `cos(π/4) / 2`).
const C: [f32; 8] = [
    0.5,
    0.490_392_64,
    0.461_939_77,
    0.415_734_8,
    0.353_553_38,
    0.277_785_12,
    0.191_341_72,
    0.097_545_16,
];

/// `1.5·2^23`: adding it to a float of magnitude below 2^22 leaves the value, rounded to the
/// nearest integer (ties to even, as SSE's conversion rounds), in the low bits of the sum's
/// representation.
const ROUNDING: f32 = 12_582_912.0;
/// The representation of [`ROUNDING`].
const ROUNDING_BITS: i32 = 0x4B40_0000;

/// Dequantizes and inverse-transforms a block (quantized values stored transposed, see
/// [`UNZIGZAG_T`]) into 8 rows of 8 pixels: the portable version, which the compiler
/// vectorises for the baseline instruction set. [`sse41::idct`] computes the same floats in
/// the same order, so the two agree on every pixel.
fn idct(block: &[i32; 64], dequant: &[f32; 64]) -> [[u8; 8]; 8] {
    let mut input = [[0f32; 8]; 8];
    for ((row, values), steps) in input
        .iter_mut()
        .zip(block.chunks_exact(8))
        .zip(dequant.chunks_exact(8))
    {
        for ((to, &from), &step) in row.iter_mut().zip(values).zip(steps) {
            *to = from as f32 * step;
        }
    }
    // The level shift (+128) folded into the DC term, which adds 1/8 of itself to every pixel.
    input[0][0] += 128.0 * 8.0;
    // Horizontal transform (rows of `input` are horizontal frequencies), transpose, vertical.
    let horizontal = idct_pass(&input);
    let mut transposed = [[0f32; 8]; 8];
    for (x, row) in horizontal.iter().enumerate() {
        for (v, &value) in row.iter().enumerate() {
            transposed[v][x] = value;
        }
    }
    let spatial = idct_pass(&transposed);
    let mut lines = [[0u8; 8]; 8];
    for (line, row) in lines.iter_mut().zip(&spatial) {
        for (to, &value) in line.iter_mut().zip(row) {
            // Exact for |value| < 2^22; anything larger (damaged data) still clamps.
            let rounded = ((value + ROUNDING).to_bits() as i32).wrapping_sub(ROUNDING_BITS);
            *to = rounded.clamp(0, 255) as u8;
        }
    }
    lines
}

/// One pass of the separable inverse DCT: `out[n][lane] = Σ_k input[k][lane]·basis(k, n)`,
/// eight independent 1-D transforms, one per lane, computed on whole rows (which the compiler
/// vectorises).
#[inline(always)]
fn idct_pass(input: &[[f32; 8]; 8]) -> [[f32; 8]; 8] {
    idct_1d!(*input, rows::add, rows::sub, rows::mul, rows::constant)
}

/// The 8-point inverse DCT, `y[n] = Σ_k x[k]·C(k)/2·cos((2n+1)kπ/16)`, split into the even
/// frequencies (a 4-point transform) and the odd ones, which add to `y[n]` and subtract from
/// `y[7-n]`. Written once over the arithmetic it is given (`add`, `sub`, `mul`, `constant`
/// paths), so that [`sse41::idct`] runs exactly the operations of the portable [`idct`].
macro_rules! idct_1d {
    ($x:expr, $add:path, $sub:path, $mul:path, $constant:path) => {{
        let x = $x;
        let c = |k: usize| $constant($crate::jpeg::C[k]);
        let t0 = $mul($add(x[0], x[4]), c(4));
        let t1 = $mul($sub(x[0], x[4]), c(4));
        let t2 = $add($mul(x[2], c(2)), $mul(x[6], c(6)));
        let t3 = $sub($mul(x[2], c(6)), $mul(x[6], c(2)));
        let even = [$add(t0, t2), $add(t1, t3), $sub(t1, t3), $sub(t0, t2)];
        let (x1, x3, x5, x7) = (x[1], x[3], x[5], x[7]);
        let odd = [
            $add(
                $add($add($mul(x1, c(1)), $mul(x3, c(3))), $mul(x5, c(5))),
                $mul(x7, c(7)),
            ),
            $sub(
                $sub($sub($mul(x1, c(3)), $mul(x3, c(7))), $mul(x5, c(1))),
                $mul(x7, c(5)),
            ),
            $add(
                $add($sub($mul(x1, c(5)), $mul(x3, c(1))), $mul(x5, c(7))),
                $mul(x7, c(3)),
            ),
            $sub(
                $add($sub($mul(x1, c(7)), $mul(x3, c(5))), $mul(x5, c(3))),
                $mul(x7, c(1)),
            ),
        ];
        [
            $add(even[0], odd[0]),
            $add(even[1], odd[1]),
            $add(even[2], odd[2]),
            $add(even[3], odd[3]),
            $sub(even[3], odd[3]),
            $sub(even[2], odd[2]),
            $sub(even[1], odd[1]),
            $sub(even[0], odd[0]),
        ]
    }};
}
use idct_1d;

/// Lane-wise arithmetic on rows of eight floats, for [`idct_1d!`].
mod rows {
    type Row = [f32; 8];

    #[inline(always)]
    pub(super) fn add(a: Row, b: Row) -> Row {
        std::array::from_fn(|i| a[i] + b[i])
    }
    #[inline(always)]
    pub(super) fn sub(a: Row, b: Row) -> Row {
        std::array::from_fn(|i| a[i] - b[i])
    }
    #[inline(always)]
    pub(super) fn mul(a: Row, b: Row) -> Row {
        std::array::from_fn(|i| a[i] * b[i])
    }
    #[inline(always)]
    pub(super) fn constant(value: f32) -> Row {
        [value; 8]
    }
}

/// Writes 8 rows of 8 pixels at (`x0`, `y0`) of the image, clipped to it.
#[inline(always)]
fn store(lines: &[[u8; 8]; 8], scan: &Scan<'_>, pixels: &mut [u8], x0: usize, y0: usize) {
    let visible_width = (scan.width - x0).min(8);
    let visible_height = (scan.height - y0).min(8);
    let start = y0 * scan.width + x0;
    for (y, line) in lines.iter().enumerate().take(visible_height) {
        let at = start + y * scan.width;
        if visible_width == 8 {
            // A fixed-size copy: one 8-byte store instead of a call to memcpy.
            if let Some(to) = pixels.get_mut(at..at + 8) {
                to.copy_from_slice(line);
            }
        } else {
            pixels[at..at + visible_width].copy_from_slice(&line[..visible_width]);
        }
    }
}

/// The inverse DCT with SSE4.1 intrinsics: the same operations as [`idct`], four lanes at a
/// time, with a shuffle transpose and saturating packs instead of the compiler's scalar
/// code for those. The intrinsics used are safe to call inside `#[target_feature]`
/// functions, and vectors move in and out of arrays through `bytemuck` casts, so this module
/// has no `unsafe`.
#[cfg(target_arch = "x86_64")]
mod sse41 {
    use std::arch::x86_64::{
        __m128, _mm_add_ps, _mm_add_ss, _mm_cvtepi32_ps, _mm_cvtps_epi32, _mm_movehl_ps,
        _mm_movelh_ps, _mm_mul_ps, _mm_packs_epi32, _mm_packus_epi16, _mm_set_ss, _mm_set1_ps,
        _mm_sub_ps, _mm_unpackhi_ps, _mm_unpacklo_ps,
    };

    use bytemuck::cast;

    #[inline]
    #[target_feature(enable = "sse")]
    fn splat(value: f32) -> __m128 {
        _mm_set1_ps(value)
    }

    #[inline]
    #[target_feature(enable = "sse")]
    fn add(a: __m128, b: __m128) -> __m128 {
        _mm_add_ps(a, b)
    }

    #[inline]
    #[target_feature(enable = "sse")]
    fn sub(a: __m128, b: __m128) -> __m128 {
        _mm_sub_ps(a, b)
    }

    #[inline]
    #[target_feature(enable = "sse")]
    fn mul(a: __m128, b: __m128) -> __m128 {
        _mm_mul_ps(a, b)
    }

    /// Transposes the 4x4 tile held in `rows`.
    #[inline]
    #[target_feature(enable = "sse")]
    fn transpose(rows: [__m128; 4]) -> [__m128; 4] {
        let low01 = _mm_unpacklo_ps(rows[0], rows[1]);
        let low23 = _mm_unpacklo_ps(rows[2], rows[3]);
        let high01 = _mm_unpackhi_ps(rows[0], rows[1]);
        let high23 = _mm_unpackhi_ps(rows[2], rows[3]);
        [
            _mm_movelh_ps(low01, low23),
            _mm_movehl_ps(low23, low01),
            _mm_movelh_ps(high01, high23),
            _mm_movehl_ps(high23, high01),
        ]
    }

    /// Runs [`super::idct_1d!`] on eight rows of two 4-lane halves: `rows[k][half]`.
    #[inline]
    #[target_feature(enable = "sse")]
    fn pass(rows: [[__m128; 2]; 8]) -> [[__m128; 2]; 8] {
        let mut out = rows;
        for half in 0..2 {
            let y = super::idct_1d!(rows.map(|row| row[half]), add, sub, mul, splat);
            for (row, value) in out.iter_mut().zip(y) {
                row[half] = value;
            }
        }
        out
    }

    /// See [`super::idct`].
    #[inline]
    #[target_feature(enable = "sse4.1")]
    pub(super) fn idct(block: &[i32; 64], dequant: &[f32; 64]) -> [[u8; 8]; 8] {
        let blocks: &[[i32; 4]; 16] = cast_ref(block);
        let steps: &[[f32; 4]; 16] = cast_ref(dequant);
        let mut input = [[splat(0.0); 2]; 8];
        for (i, (values, step)) in blocks.iter().zip(steps).enumerate() {
            input[i / 2][i % 2] = _mm_mul_ps(_mm_cvtepi32_ps(cast(*values)), cast(*step));
        }
        // The level shift (+128) folded into the DC term, as in the portable version.
        input[0][0] = _mm_add_ss(input[0][0], _mm_set_ss(128.0 * 8.0));
        let horizontal = pass(input);
        // Transpose 8x8 as four 4x4 tiles: tile (a, b) goes to (b, a).
        let mut transposed = horizontal;
        for a in 0..2 {
            for b in 0..2 {
                let tile = transpose([0, 1, 2, 3].map(|i| horizontal[a * 4 + i][b]));
                for (i, row) in tile.into_iter().enumerate() {
                    transposed[b * 4 + i][a] = row;
                }
            }
        }
        let spatial = pass(transposed);
        // Round to nearest (even), then saturate to i16 and to u8: two rows per pack.
        let mut lines = [[0u8; 8]; 8];
        for (pair, rows) in lines.chunks_exact_mut(2).zip(spatial.chunks_exact(2)) {
            let first = _mm_packs_epi32(_mm_cvtps_epi32(rows[0][0]), _mm_cvtps_epi32(rows[0][1]));
            let second = _mm_packs_epi32(_mm_cvtps_epi32(rows[1][0]), _mm_cvtps_epi32(rows[1][1]));
            let bytes: [[u8; 8]; 2] = cast(_mm_packus_epi16(first, second));
            pair.copy_from_slice(&bytes);
        }
        lines
    }

    /// `bytemuck::cast_ref` for fixed-size arrays of the same size.
    #[inline(always)]
    fn cast_ref<A: bytemuck::Pod, B: bytemuck::Pod>(from: &A) -> &B {
        bytemuck::cast_ref(from)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unzigzag_follows_the_zigzag_path() {
        // Zigzag positions 1 and 2 are (v=0, u=1) and (v=1, u=0); transposed storage puts
        // them at u*8+v = 8 and 1.
        assert_eq!(UNZIGZAG_T[0], 0);
        assert_eq!(UNZIGZAG_T[1], 8);
        assert_eq!(UNZIGZAG_T[2], 1);
        assert_eq!(UNZIGZAG_T[63], 63);
        let mut seen = [false; 64];
        for &index in &UNZIGZAG_T {
            seen[usize::from(index)] = true;
        }
        assert!(seen.iter().all(|&s| s));
    }

    #[test]
    fn the_idct_of_one_coefficient_is_its_cosine() {
        // A block with only coefficient (v=1, u=2): pixel(y, x) = 128 + F·C(1)·C(2)·... as
        // the textbook formula gives it.
        let f = 200.0f64;
        let mut block = [0i32; 64];
        block[2 * 8 + 1] = f as i32; // transposed storage: u * 8 + v
        let pixels = idct(&block, &[1.0; 64]);
        let pi = std::f64::consts::PI;
        for (y, line) in pixels.iter().enumerate() {
            for (x, &pixel) in line.iter().enumerate() {
                let want = 128.0
                    + 0.25
                        * f
                        * ((2 * x + 1) as f64 * 2.0 * pi / 16.0).cos()
                        * ((2 * y + 1) as f64 * pi / 16.0).cos();
                let got = f64::from(pixel);
                assert!(
                    (got - want).abs() <= 0.5 + 1e-3,
                    "({y},{x}): {got} vs {want}"
                );
            }
        }
    }

    #[test]
    fn unstuffing_drops_stuffed_zeros_and_stops_at_a_marker() {
        let mut scan = Vec::new();
        let coded = unstuff(&[1, 0xFF, 0, 2, 0xFF, 0xFF, 0xD9, 3], &mut scan);
        assert_eq!(coded, (3, true));
        assert_eq!(&scan[..3], [1, 0xFF, 2]);
        assert!(scan[3..].iter().all(|&b| b == 0));
        assert_eq!(scan.len(), 3 + PADDING);
        assert_eq!(unstuff(&[1, 2, 0xFF, 0], &mut scan), (3, false));
        assert_eq!(unstuff(&[1, 2, 0xFF], &mut scan), (2, false));
    }

    /// A `width` x `height` grayscale JPEG of noise (as DLIO writes) or of a smooth gradient
    /// (short blocks that end with end-of-block), encoded by the `image` crate.
    fn jpeg(width: u32, height: u32, quality: u8, noise: bool, seed: u64) -> (Vec<u8>, Vec<u8>) {
        let mut pixels = vec![0u8; (width * height) as usize];
        if noise {
            crate::DataRng::for_file(seed, 0, 0).fill(&mut pixels);
        } else {
            for (i, pixel) in pixels.iter_mut().enumerate() {
                let (x, y) = (i % width as usize, i / width as usize);
                *pixel = (x * 3 + y * 2 + seed as usize) as u8;
            }
        }
        let mut out = Vec::new();
        image::codecs::jpeg::JpegEncoder::new_with_quality(&mut out, quality)
            .write_image(&pixels, width, height, image::ExtendedColorType::L8)
            .unwrap();
        (out, pixels)
    }

    use image::ImageEncoder;

    #[test]
    fn decodes_like_zune_within_one_grey_level_and_both_idcts_agree() {
        let mut decoder = GrayJpegDecoder::new();
        let mut portable = GrayJpegDecoder::new();
        #[cfg(target_arch = "x86_64")]
        {
            portable.sse41 = false;
        }
        let (mut got, mut got_portable) = (Vec::new(), Vec::new());
        for (width, height) in [(256, 256), (17, 33), (1, 1), (8, 8), (640, 3), (9, 70)] {
            for quality in [10, 30, 75, 95, 100] {
                for noise in [true, false] {
                    let (file, _) = jpeg(width, height, quality, noise, 7);
                    let want = image::load_from_memory(&file)
                        .unwrap()
                        .into_luma8()
                        .into_raw();
                    let case = format!("{width}x{height} quality {quality} noise {noise}");
                    let dims = decoder.decode(&file, &mut got).unwrap();
                    assert_eq!(dims, Some((width as usize, height as usize)), "{case}");
                    let worst = got.iter().zip(&want).map(|(a, b)| a.abs_diff(*b)).max();
                    assert!(worst <= Some(1), "{case}: off by {worst:?}");
                    portable.decode(&file, &mut got_portable).unwrap().unwrap();
                    assert!(got == got_portable, "{case}: the two IDCTs differ");
                }
            }
        }
    }

    #[test]
    fn the_sse41_idct_computes_the_portable_one_exactly() {
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("sse4.1") {
            let mut rng = crate::DataRng::for_file(3, 0, 0);
            let mut bytes = [0u8; 64 * 3];
            for round in 0..2000 {
                rng.fill(&mut bytes);
                let mut block = [0i32; 64];
                let mut dequant = [0f32; 64];
                for (i, (value, step)) in block.iter_mut().zip(&mut dequant).enumerate() {
                    // Coefficients of 8-bit images (|value·step| < 2^12), some blocks sparse.
                    let raw = i32::from(i16::from_le_bytes([bytes[2 * i], bytes[2 * i + 1]]));
                    *value = if round % 3 == 0 && i > 3 {
                        0
                    } else {
                        raw % 256
                    };
                    *step = f32::from(bytes[128 + i] % 16 + 1);
                }
                // SAFETY: the CPU has SSE4.1, checked above.
                let simd = unsafe { sse41_idct_for_test(&block, &dequant) };
                assert_eq!(simd, idct(&block, &dequant), "round {round}");
            }
        }
    }

    /// Calls [`sse41::idct`] from a test (which has no `#[target_feature]`).
    ///
    /// # Safety
    /// The CPU must support SSE4.1.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "sse4.1")]
    unsafe fn sse41_idct_for_test(block: &[i32; 64], dequant: &[f32; 64]) -> [[u8; 8]; 8] {
        sse41::idct(block, dequant)
    }

    #[test]
    fn repeated_table_definitions_keep_the_built_tables() {
        let mut decoder = GrayJpegDecoder::new();
        let mut pixels = Vec::new();
        let (first, _) = jpeg(16, 16, 75, true, 1);
        decoder.decode(&first, &mut pixels).unwrap().unwrap();
        assert!(decoder.dc[0].built && decoder.ac[0].built);
        let lut = |decoder: &GrayJpegDecoder| decoder.ac[0].lut.as_deref().unwrap()[17];
        let before = lut(&decoder);
        let (second, _) = jpeg(16, 16, 75, true, 2);
        decoder.ac[0].lut.as_deref_mut().unwrap()[17] ^= 1; // a rebuild would undo this
        decoder.decode(&second, &mut pixels).unwrap().unwrap();
        assert_eq!(lut(&decoder), before ^ 1);
    }

    /// `file` with the byte at the first occurrence of `marker` (0xFF, code) changed.
    fn patched(file: &[u8], marker: u8, at: usize, value: u8) -> Vec<u8> {
        let mut file = file.to_vec();
        let start = file.windows(2).position(|w| w == [0xFF, marker]).unwrap();
        file[start + at] = value;
        file
    }

    #[test]
    fn other_jpegs_are_left_to_the_general_decoder() {
        let mut decoder = GrayJpegDecoder::new();
        let mut pixels = Vec::new();
        let (gray, _) = jpeg(24, 16, 75, true, 1);
        assert!(decoder.decode(&gray, &mut pixels).unwrap().is_some());
        // Progressive and arithmetic-coded frames; 12-bit samples.
        for code in [0xC2, 0xC9] {
            assert!(
                decoder
                    .decode(&patched(&gray, 0xC0, 1, code), &mut pixels)
                    .unwrap()
                    .is_none()
            );
        }
        assert!(
            decoder
                .decode(&patched(&gray, 0xC0, 4, 12), &mut pixels)
                .unwrap()
                .is_none()
        );
        // A restart interval: a DRI segment (Ri = 4) before the scan.
        let sos = gray.windows(2).position(|w| w == [0xFF, 0xDA]).unwrap();
        let mut restarts = gray[..sos].to_vec();
        restarts.extend_from_slice(&[0xFF, 0xDD, 0, 4, 0, 4]);
        restarts.extend_from_slice(&gray[sos..]);
        assert!(decoder.decode(&restarts, &mut pixels).unwrap().is_none());
        // Colour.
        let mut colour = Vec::new();
        image::codecs::jpeg::JpegEncoder::new_with_quality(&mut colour, 75)
            .write_image(&[7u8; 8 * 8 * 3], 8, 8, image::ExtendedColorType::Rgb8)
            .unwrap();
        assert!(decoder.decode(&colour, &mut pixels).unwrap().is_none());
        // Not a JPEG at all.
        assert!(decoder.decode(b"\x89PNG", &mut pixels).unwrap().is_none());
        assert!(decoder.decode(&[], &mut pixels).unwrap().is_none());
        // The decoder still works afterwards.
        assert_eq!(decoder.decode(&gray, &mut pixels).unwrap(), Some((24, 16)));
    }

    #[test]
    fn truncated_scans_are_refused() {
        let mut decoder = GrayJpegDecoder::new();
        let mut pixels = Vec::new();
        let (file, _) = jpeg(64, 64, 75, true, 5);
        let sos = file.windows(2).position(|w| w == [0xFF, 0xDA]).unwrap();
        for cut in [sos + 20, sos + 400, file.len() - 200] {
            let result = decoder.decode(&file[..cut], &mut pixels);
            assert!(matches!(result, Err(Truncated)), "cut at {cut}: {result:?}");
        }
        // Data that a marker ends early is damaged rather than truncated: a general decoder
        // decides what to make of it.
        let mut ended = file[..sos + 400].to_vec();
        ended.extend_from_slice(&[0xFF, 0xD9]);
        assert!(decoder.decode(&ended, &mut pixels).unwrap().is_none());
        // Without its EOI marker the scan is still complete.
        let whole = decoder.decode(&file[..file.len() - 2], &mut pixels);
        assert_eq!(whole.unwrap(), Some((64, 64)));
    }

    #[test]
    fn a_header_that_asks_for_gigabytes_is_refused_before_allocating() {
        let (mut file, _) = jpeg(24, 17, 75, true, 1);
        let sof = file.windows(2).position(|w| w == [0xFF, 0xC0]).unwrap();
        // Height and width (after the length and the precision) become 65535 x 65535.
        file[sof + 5..sof + 9].copy_from_slice(&[0xFF; 4]);
        let mut decoder = GrayJpegDecoder::new();
        let mut pixels = Vec::new();
        assert!(!matches!(decoder.decode(&file, &mut pixels), Ok(Some(_))));
        assert!(
            pixels.capacity() < 1 << 20,
            "{} bytes allocated for a 24x17 scan",
            pixels.capacity()
        );
    }

    #[test]
    fn damaged_files_never_panic() {
        let mut decoder = GrayJpegDecoder::new();
        let mut pixels = Vec::new();
        let mut rng = crate::DataRng::for_file(11, 0, 0);
        let mut noise = [0u8; 16];
        for (round, quality) in (0..3000).zip([20u8, 75, 100].into_iter().cycle()) {
            let (mut file, _) = jpeg(24, 17, quality, round % 2 == 0, round);
            rng.fill(&mut noise);
            // Overwrite a few bytes anywhere (headers, tables, scan), sometimes truncate.
            for pair in noise[..8].chunks_exact(2) {
                let at = usize::from(u16::from_le_bytes([pair[0], pair[1]])) % file.len();
                file[at] = noise[8 + at % 8];
            }
            if noise[15] % 4 == 0 {
                file.truncate(usize::from(noise[14]) * file.len() / 256);
            }
            if let Ok(Some((width, height))) = decoder.decode(&file, &mut pixels) {
                assert_eq!(pixels.len(), width * height);
            }
        }
    }
}
