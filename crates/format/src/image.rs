//! `jpeg` and `png`: one grayscale 8-bit image of `d1` rows by `d2` columns per file, as DLIO
//! writes it with PIL (`Image.fromarray(uint8[d1, d2])`). `num_samples_per_file` is ignored for
//! images, as upstream ignores it: a file is one image.
//!
//! Reading decodes the whole image, as `np.asarray(PIL.Image.open(f))` does; the sample is the
//! decoded pixels. JPEG is lossy, so files are smaller than `record_length_bytes` (upstream's
//! "JPEG generator issue"); the sample handed out still has `d1·d2` bytes.
//!
//! Decoding is most of what reading an image costs, so the images DLIO writes take fast paths
//! into buffers the reader reuses: grayscale baseline JPEGs go through [`crate::jpeg`], 8-bit
//! grayscale PNGs straight through the `png` crate. Every other image goes through the `image`
//! crate. A grayscale baseline JPEG whose file ends inside its image data is refused, as
//! Pillow refuses it; other JPEGs go to the `image` crate, which decodes a truncated scan
//! with the missing part filled in.

use std::io::Cursor;
use std::path::Path;

use dlio_config::{ConfigError, DatasetConfig, ElementType, FormatKind};
use dlio_storage::{IoBuffer, Storage};
use image::{ExtendedColorType, ImageEncoder, ImageFormat};

use crate::descriptor::FormatDescriptor;
use crate::jpeg::GrayJpegDecoder;

use crate::ranged::{BufferPlace, read_range, write_whole_file};
use crate::{DataRng, FileKey, FileLayout, Format, FormatError, FormatReader};

/// JPEG quality PIL uses by default.
const JPEG_QUALITY: u8 = 75;

/// The image formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ImageKind {
    Jpeg,
    Png,
}

/// `jpeg` or `png`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ImageFileFormat {
    pub(crate) kind: ImageKind,
}

/// `jpeg`: one grayscale image per file, as PIL writes it.
pub(crate) const JPEG: FormatDescriptor = FormatDescriptor {
    kind: FormatKind::Jpeg,
    aliases: &[],
    extensions: &["jpg", "jpeg"],
    magic: b"\xff\xd8",
    stores_samples_as_they_are: false,
    read_as_bytes_by_the_fork: true,
    element: Some(ElementType::Uint8),
    built: true,
    check: check_image_dataset,
    build: |_, _| {
        Ok(Box::new(ImageFileFormat {
            kind: ImageKind::Jpeg,
        }))
    },
};

/// `png`: one grayscale image per file, as PIL writes it.
pub(crate) const PNG: FormatDescriptor = FormatDescriptor {
    kind: FormatKind::Png,
    aliases: &[],
    extensions: &["png"],
    magic: b"\x89PNG",
    build: |_, _| {
        Ok(Box::new(ImageFileFormat {
            kind: ImageKind::Png,
        }))
    },
    ..JPEG
};

/// DLIO's checks of an image data set: at most two dimensions (an error, as upstream's), and
/// a warning that images are uint8 whatever `record_element_type` says.
fn check_image_dataset(dataset: &DatasetConfig) -> Result<Vec<String>, ConfigError> {
    let name = dataset.format.name();
    if dataset.record_dims.len() > 2 {
        return Err(ConfigError::Invalid {
            key: "dataset.record_dims".into(),
            message: format!(
                "{name} format does not support more than 2 dimensions, but got {} dimensions.",
                dataset.record_dims.len()
            ),
            fix: "give record_dims as [height, width] for images".into(),
        });
    }
    let mut warnings = Vec::new();
    if dataset.record_element_type != ElementType::Uint8 {
        warnings.push(format!(
            "dataset.record_element_type is {} but {name} images are always uint8 (as in DLIO); \
             uint8 is used",
            dataset.record_element_type.name()
        ));
    }
    Ok(warnings)
}

/// Height and width of the image of `layout`; more than two dimensions is DLIO's error.
pub(crate) fn image_size(name: &str, layout: &FileLayout) -> Result<(u32, u32), FormatError> {
    let dims = &layout.sample_dims;
    let (height, width) = match dims.as_slice() {
        [] => (1, 1),
        // One dimension is a pixel count: the squarest image that holds no more.
        [n] => {
            let h = n.isqrt().max(1);
            (h, (n / h).max(1))
        }
        [h, w] => (*h, *w),
        _ => {
            return Err(FormatError::unsupported(
                format!(
                    "{name} format does not support more than 2 dimensions, but got {} dimensions.",
                    dims.len()
                ),
                "give dataset.record_dims as [height, width] for images",
            ));
        }
    };
    let fit = |v: usize| u32::try_from(v).ok().filter(|&v| v > 0 && v <= 65_500);
    match (fit(height), fit(width)) {
        (Some(h), Some(w)) => Ok((h, w)),
        _ => Err(FormatError::unsupported(
            format!("an image of {height}x{width} pixels cannot be encoded as {name}"),
            "use image dimensions between 1 and 65500",
        )),
    }
}

impl Format for ImageFileFormat {
    fn name(&self) -> &'static str {
        match self.kind {
            ImageKind::Jpeg => "jpeg",
            ImageKind::Png => "png",
        }
    }

    fn extension(&self) -> &'static str {
        self.name()
    }

    fn generate(
        &self,
        storage: &dyn Storage,
        path: &Path,
        layout: &FileLayout,
        rng: &mut DataRng,
    ) -> Result<u64, FormatError> {
        let encoded = self.encode(layout, rng)?;
        write_whole_file(storage, path, &encoded)
    }

    fn reader(&self, _layout: &FileLayout) -> Box<dyn FormatReader> {
        Box::new(ImageReader {
            kind: self.kind,
            file: None,
            jpeg: GrayJpegDecoder::new(),
            images: rustc_hash::FxHashMap::default(),
            spare: Vec::new(),
        })
    }
}

impl ImageFileFormat {
    /// The file of `layout`'s image: noise pixels from `rng`, encoded.
    fn encode(&self, layout: &FileLayout, rng: &mut DataRng) -> Result<Vec<u8>, FormatError> {
        let (height, width) = image_size(self.name(), layout)?;
        let mut pixels = vec![0u8; height as usize * width as usize];
        rng.fill(&mut pixels);
        let mut encoded = Vec::new();
        let result = match self.kind {
            ImageKind::Jpeg => {
                image::codecs::jpeg::JpegEncoder::new_with_quality(&mut encoded, JPEG_QUALITY)
                    .write_image(&pixels, width, height, ExtendedColorType::L8)
            }
            ImageKind::Png => image::codecs::png::PngEncoder::new(&mut encoded).write_image(
                &pixels,
                width,
                height,
                ExtendedColorType::L8,
            ),
        };
        result.map_err(|e| {
            FormatError::unsupported(
                format!("encoding a {width}x{height} {} image: {e}", self.name()),
                "use smaller image dimensions",
            )
        })?;
        Ok(encoded)
    }
}

/// Closed images whose pixel buffers are kept for reuse.
const SPARE_IMAGES: usize = 4;

struct ImageReader {
    kind: ImageKind,
    /// The encoded file, reused across files.
    file: Option<IoBuffer>,
    /// The fast decoder for grayscale baseline JPEGs (DLIO's), reused across files.
    jpeg: GrayJpegDecoder,
    /// The decoded pixels of each open file.
    images: rustc_hash::FxHashMap<FileKey, Vec<u8>>,
    spare: Vec<Vec<u8>>,
}

impl FormatReader for ImageReader {
    /// Reads and decodes the whole image.
    fn open(
        &mut self,
        storage: &dyn Storage,
        key: FileKey,
        path: &Path,
    ) -> Result<(), FormatError> {
        let mut handle = storage.open(path)?;
        let len = usize::try_from(handle.len())
            .map_err(|_| FormatError::corrupt(path, 0, "an image larger than memory"))?;
        let place = BufferPlace::of(storage.capabilities());
        let bytes = read_range(&mut *handle, &mut self.file, place, 0, len)?;
        drop(handle);
        let mut pixels = self
            .images
            .remove(&key)
            .or_else(|| self.spare.pop())
            .unwrap_or_default();
        let decoded = match self.kind {
            ImageKind::Jpeg => match self.jpeg.decode(bytes, &mut pixels) {
                Ok(Some(_)) => Ok(()),
                Ok(None) => decode_any(bytes, ImageFormat::Jpeg, &mut pixels),
                Err(truncated) => Err(truncated.into()),
            },
            ImageKind::Png => decode_png(bytes, &mut pixels),
        };
        match decoded {
            Ok(()) => {
                self.images.insert(key, pixels);
                Ok(())
            }
            Err(error) => {
                self.recycle(pixels);
                Err(FormatError::corrupt(
                    path,
                    0,
                    format!("cannot decode the image: {error}"),
                ))
            }
        }
    }

    /// The whole image, whatever the index: a file is one image, and DLIO's image reader
    /// hands it out for every sample index of the file.
    fn read_sample(
        &mut self,
        _storage: &dyn Storage,
        key: FileKey,
        _index: u32,
    ) -> Result<&[u8], FormatError> {
        self.images
            .get(&key)
            .map(Vec::as_slice)
            .ok_or(FormatError::FileNotOpen { key })
    }

    fn close(&mut self, key: FileKey) {
        if let Some(pixels) = self.images.remove(&key) {
            self.recycle(pixels);
        }
    }
}

impl ImageReader {
    fn recycle(&mut self, pixels: Vec<u8>) {
        if self.spare.len() < SPARE_IMAGES {
            self.spare.push(pixels);
        }
    }
}

/// Decodes an 8-bit grayscale PNG (DLIO's) straight into `pixels`; any other PNG goes
/// through [`decode_any`].
fn decode_png(bytes: &[u8], pixels: &mut Vec<u8>) -> Result<(), DecodeError> {
    let mut decoder = png::Decoder::new(Cursor::new(bytes));
    // The expansions the `image` crate asks for, so both paths agree on every PNG.
    decoder.set_transformations(png::Transformations::EXPAND);
    let mut reader = decoder.read_info()?;
    let output = reader.output_color_type();
    let len = reader.output_buffer_size();
    match (output, len) {
        ((png::ColorType::Grayscale, png::BitDepth::Eight), Some(len)) => {
            // The frame overwrites every byte, so a reused buffer of the right size is not
            // cleared first.
            pixels.resize(len, 0);
            reader.next_frame(pixels)?;
            Ok(())
        }
        _ => decode_any(bytes, ImageFormat::Png, pixels),
    }
}

/// Why an image could not be decoded (the reader wraps it in [`FormatError::Corrupt`]).
#[derive(Debug, thiserror::Error)]
enum DecodeError {
    #[error(transparent)]
    Png(#[from] png::DecodingError),
    #[error(transparent)]
    Image(#[from] image::ImageError),
    #[error(transparent)]
    Truncated(#[from] crate::jpeg::Truncated),
}

/// Decodes any image the `image` crate reads into its luma plane (grayscale images as they
/// are; others are converted, where PIL's asarray would hand out all channels).
fn decode_any(bytes: &[u8], format: ImageFormat, pixels: &mut Vec<u8>) -> Result<(), DecodeError> {
    let decoded = image::load_from_memory_with_format(bytes, format)?;
    *pixels = match decoded {
        image::DynamicImage::ImageLuma8(gray) => gray.into_raw(),
        other => other.into_luma8().into_raw(),
    };
    Ok(())
}

/// The bytes of the file dlio generates for an image of `pixels` pixels (one dimension: the
/// squarest image of no more pixels) in `kind`'s format (`jpeg` or `png`; `None` for any other
/// format): what a characterisation needs to give generated images a traced file size, as
/// the encoded size of noise is not the pixel count.
pub fn generated_image_bytes(kind: FormatKind, pixels: u64) -> Option<u64> {
    let format = ImageFileFormat {
        kind: match kind {
            FormatKind::Jpeg => ImageKind::Jpeg,
            FormatKind::Png => ImageKind::Png,
            _ => return None,
        },
    };
    let layout = FileLayout {
        samples: 1,
        sample_dims: vec![usize::try_from(pixels).ok()?],
        element: dlio_config::ElementType::Uint8,
        compression: dlio_config::Compression::None,
        fixed_size: false,
    };
    let encoded = format
        .encode(&layout, &mut DataRng::for_file(0, 0, 0))
        .ok()?;
    Some(encoded.len() as u64)
}

#[cfg(test)]
mod tests {
    use dlio_config::{Compression, ElementType};
    use dlio_storage::PosixStorage;

    use super::*;

    fn layout(dims: Vec<usize>) -> FileLayout {
        FileLayout {
            samples: 1,
            sample_dims: dims,
            element: ElementType::Uint8,
            compression: Compression::None,
            fixed_size: false,
        }
    }

    #[test]
    fn images_decode_to_d1_by_d2_gray_pixels() {
        let dir = tempfile::tempdir().unwrap();
        let storage = PosixStorage::new();
        for kind in [ImageKind::Jpeg, ImageKind::Png] {
            let format = ImageFileFormat { kind };
            let path = dir.path().join(format!("a.{}", format.extension()));
            let l = layout(vec![30, 50]);
            format
                .generate(&storage, &path, &l, &mut DataRng::for_file(1, 0, 0))
                .unwrap();
            let decoded = image::open(&path).unwrap();
            assert_eq!((decoded.width(), decoded.height()), (50, 30));
            assert!(matches!(decoded, image::DynamicImage::ImageLuma8(_)));
            let mut reader = format.reader(&l);
            reader.open(&storage, 0, &path).unwrap();
            assert_eq!(reader.read_sample(&storage, 0, 0).unwrap().len(), 1500);
            assert_eq!(reader.read_sample(&storage, 0, 1).unwrap().len(), 1500);
        }
        // PNG is lossless: the pixels are the generated bytes.
        let path = dir.path().join("a.png");
        let mut expected = vec![0u8; 1500];
        DataRng::for_file(1, 0, 0).fill(&mut expected);
        let decoded = image::open(&path).unwrap().into_luma8().into_raw();
        assert_eq!(decoded, expected);
    }

    #[test]
    fn images_the_fast_paths_leave_alone_decode_to_their_luma_plane() {
        // A colour JPEG and a 16-bit PNG go through the `image` crate, as before.
        let dir = tempfile::tempdir().unwrap();
        let storage = PosixStorage::new();
        let mut rgb = vec![0u8; 20 * 12 * 3];
        DataRng::for_file(5, 0, 0).fill(&mut rgb);
        let jpeg = dir.path().join("colour.jpeg");
        let mut encoded = Vec::new();
        image::codecs::jpeg::JpegEncoder::new_with_quality(&mut encoded, 90)
            .write_image(&rgb, 20, 12, ExtendedColorType::Rgb8)
            .unwrap();
        std::fs::write(&jpeg, &encoded).unwrap();
        let png = dir.path().join("deep.png");
        let deep: Vec<u8> = (0..20 * 12 * 2).map(|i| (i * 7) as u8).collect();
        let mut encoded = Vec::new();
        image::codecs::png::PngEncoder::new(&mut encoded)
            .write_image(&deep, 20, 12, ExtendedColorType::L16)
            .unwrap();
        std::fs::write(&png, &encoded).unwrap();
        for (kind, path) in [(ImageKind::Jpeg, jpeg), (ImageKind::Png, png)] {
            let want = image::open(&path).unwrap().into_luma8().into_raw();
            let mut reader = ImageFileFormat { kind }.reader(&layout(vec![12, 20]));
            reader.open(&storage, 3, &path).unwrap();
            assert_eq!(reader.read_sample(&storage, 3, 0).unwrap(), want.as_slice());
            reader.close(3);
        }
    }

    #[test]
    fn a_reader_reuses_its_buffers_and_keeps_files_apart() {
        let dir = tempfile::tempdir().unwrap();
        let storage = PosixStorage::new();
        let format = ImageFileFormat {
            kind: ImageKind::Jpeg,
        };
        let l = layout(vec![16, 16]);
        let paths: Vec<_> = (0..3)
            .map(|i| {
                let path = dir.path().join(format!("{i}.jpeg"));
                format
                    .generate(&storage, &path, &l, &mut DataRng::for_file(1, i, 0))
                    .unwrap();
                path
            })
            .collect();
        let mut reader = format.reader(&l);
        let mut first = Vec::new();
        for round in 0..3 {
            for (key, path) in paths.iter().enumerate() {
                reader.open(&storage, key as u64, path).unwrap();
            }
            let samples: Vec<Vec<u8>> = (0..3)
                .map(|key| reader.read_sample(&storage, key, 0).unwrap().to_vec())
                .collect();
            assert_ne!(samples[0], samples[1]);
            if round == 0 {
                first = samples;
            } else {
                assert_eq!(samples, first);
            }
            for key in 0..3 {
                reader.close(key);
            }
        }
        assert!(reader.read_sample(&storage, 0, 0).is_err());
    }

    #[test]
    fn more_than_two_dimensions_is_dlios_error() {
        let err = image_size("jpeg", &layout(vec![2, 3, 4]))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains(
                "jpeg format does not support more than 2 dimensions, but got 3 dimensions."
            ),
            "{err}"
        );
    }

    #[test]
    fn a_damaged_image_names_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let storage = PosixStorage::new();
        let png = dir.path().join("bad.png");
        std::fs::write(&png, b"\x89PNG\r\n\x1a\nthis is not a png").unwrap();
        let jpeg = dir.path().join("bad.jpeg");
        std::fs::write(&jpeg, b"\xFF\xD8\xFF\xDBthis is not a jpeg").unwrap();
        // A JPEG cut short in its scan: the fast decoder reports it as truncated.
        let cut = dir.path().join("cut.jpeg");
        let l = layout(vec![64, 64]);
        let jpeg_format = ImageFileFormat {
            kind: ImageKind::Jpeg,
        };
        jpeg_format
            .generate(&storage, &cut, &l, &mut DataRng::for_file(1, 0, 0))
            .unwrap();
        let whole = std::fs::read(&cut).unwrap();
        std::fs::write(&cut, &whole[..whole.len() / 2]).unwrap();
        for (kind, path, name) in [
            (ImageKind::Png, png, "bad.png"),
            (ImageKind::Jpeg, jpeg, "bad.jpeg"),
            (ImageKind::Jpeg, cut, "cut.jpeg"),
        ] {
            let mut reader = ImageFileFormat { kind }.reader(&l);
            let err = reader.open(&storage, 0, &path).unwrap_err().to_string();
            assert!(err.contains(name) && err.contains("cannot decode"), "{err}");
            assert!(reader.read_sample(&storage, 0, 0).is_err());
        }
    }
}
