//! `jpeg` and `png`: one grayscale 8-bit image of `d1` rows by `d2` columns per file, as DLIO
//! writes it with PIL (`Image.fromarray(uint8[d1, d2])`). `num_samples_per_file` is ignored for
//! images, as upstream ignores it: a file is one image.
//!
//! Reading decodes the whole image, as `np.asarray(PIL.Image.open(f))` does; the sample is the
//! decoded pixels. JPEG is lossy, so files are smaller than `record_length_bytes` (upstream's
//! "JPEG generator issue"); the sample handed out still has `d1·d2` bytes.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use dlio_storage::{IoBuffer, Storage};
use image::{ExtendedColorType, ImageEncoder, ImageFormat};

use crate::ranged::{read_range, write_whole_file};
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

/// Height and width of the image of `layout`; more than two dimensions is DLIO's error.
pub(crate) fn image_size(name: &str, layout: &FileLayout) -> Result<(u32, u32), FormatError> {
    let dims = &layout.sample_dims;
    let (height, width) = match dims.as_slice() {
        [] => (1, 1),
        [w] => (1, *w),
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
        write_whole_file(storage, path, &encoded)
    }

    fn reader(&self, _layout: &FileLayout) -> Box<dyn FormatReader> {
        Box::new(ImageReader {
            kind: self.kind,
            file: None,
            images: HashMap::new(),
        })
    }
}

struct ImageReader {
    kind: ImageKind,
    file: Option<IoBuffer>,
    images: HashMap<FileKey, (PathBuf, Vec<u8>)>, // path kept for diagnostics
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
        let alignment = storage.capabilities().alignment;
        let bytes = read_range(&mut *handle, &mut self.file, alignment, 0, len)?;
        let format = match self.kind {
            ImageKind::Jpeg => ImageFormat::Jpeg,
            ImageKind::Png => ImageFormat::Png,
        };
        let decoded = image::load_from_memory_with_format(bytes, format)
            .map_err(|e| FormatError::corrupt(path, 0, format!("cannot decode the image: {e}")))?;
        // Grayscale images decode to L8 without a copy; others are converted, as PIL's
        // asarray would hand out all channels (we hand out the luma plane).
        let pixels = match decoded {
            image::DynamicImage::ImageLuma8(gray) => gray.into_raw(),
            other => other.into_luma8().into_raw(),
        };
        self.images.insert(key, (path.to_path_buf(), pixels));
        Ok(())
    }

    /// The whole image, whatever the index: a file is one image, and DLIO's image reader
    /// hands it out for every sample index of the file.
    fn read_sample(
        &mut self,
        _storage: &dyn Storage,
        key: FileKey,
        _index: u32,
    ) -> Result<&[u8], FormatError> {
        let (_, pixels) = self
            .images
            .get(&key)
            .ok_or(FormatError::FileNotOpen { key })?;
        Ok(pixels)
    }

    fn close(&mut self, key: FileKey) {
        self.images.remove(&key);
    }
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
        let path = dir.path().join("bad.png");
        std::fs::write(&path, b"\x89PNG\r\n\x1a\nthis is not a png").unwrap();
        let format = ImageFileFormat {
            kind: ImageKind::Png,
        };
        let mut reader = format.reader(&layout(vec![2, 2]));
        let err = reader
            .open(&PosixStorage::new(), 0, &path)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("bad.png") && err.contains("cannot decode"),
            "{err}"
        );
    }
}
