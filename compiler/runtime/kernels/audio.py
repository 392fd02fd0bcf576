"""TF's audio ops (tf.audio and the speech_commands / micro_speech front end): AudioSpectrogram,
Mfcc, DecodeWav and EncodeWav.

AudioSpectrogram slides a periodic Hann window of `window_size` samples by `stride` over each
channel, zero-pads every frame to the next power of two and keeps |DFT|^2 of its fft/2 + 1 bins
(or its square root), computed in double as TF does and rounded to float once.

Mfcc is TF's own HTK-style design (mfcc_mel_filterbank.cc, mfcc_dct.cc), not librosa's: the
filterbank sums square roots of the power bins under triangles equally spaced in mel
(1127 ln(1 + f / 700)), a bin contributing `w` to one channel and `1 - w` to the next; energies
below 1e-12 are raised to it before the natural log; the DCT is sqrt(2 / n) cos(i pi (j + .5) / n)
with no special first row.  When the upper limit lies past the last bin TF's filterbank gives up
and every coefficient is 0; that is reproduced too.  `MelFilterbank.matrix` and `dct_matrix`
are the same design as dense matrices, for the ONNX lowering.

DecodeWav / EncodeWav read and write 16-bit PCM WAV byte for byte as TF's wav_io.cc does,
including its int32 offset arithmetic and the chunks it skips.
"""
from __future__ import annotations

import functools
import math
import struct
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from .common import attr, checked_shape, require_rank, scalar_int
from .registry import KernelError, kernel

Array = np.ndarray
Attrs = Mapping[str, object]

FILTERBANK_FLOOR = 1e-12
_INT32_MIN = -(1 << 31)


# ---------------------------------------------------------------- AudioSpectrogram


def fft_length(window_size: int) -> int:
    """The next power of two >= window_size (TF's NextPowerOfTwo)."""
    return 1 << (int(window_size) - 1).bit_length()


def spectrogram_bins(window_size: int) -> int:
    return fft_length(window_size) // 2 + 1


def frame_count(samples: int, window_size: int, stride: int) -> int:
    """Frames of a spectrogram: windows that fit entirely, the first at sample 0."""
    return 0 if samples < window_size else 1 + (samples - window_size) // stride


def periodic_hann(window_size: int) -> Array:
    """0.5 - 0.5 cos(2 pi i / n) in double: periodic, so its last sample is not 0."""
    pi = math.atan(1) * 4
    return np.asarray([0.5 - 0.5 * math.cos((2 * pi * i) / window_size) for i in range(window_size)])


def spectrogram_attrs(attrs: Attrs) -> tuple[int, int, bool]:
    """(window_size, stride, magnitude_squared), checked as TF's constructor checks them."""
    window, stride = int(attr(attrs, "window_size")), int(attr(attrs, "stride"))
    if window <= 1:
        raise KernelError(f"window_size must be > 1, got {window}")
    if stride <= 0:
        raise KernelError(f"stride must be > 0, got {stride}")
    return window, stride, bool(attr(attrs, "magnitude_squared", False))


@kernel("AudioSpectrogram")
def _audio_spectrogram(attrs: Attrs, inputs: list[Array]) -> list[Array]:
    window, stride, squared = spectrogram_attrs(attrs)
    audio = inputs[0]
    require_rank(audio, 2, "input")
    samples, channels = audio.shape
    frames, bins = frame_count(samples, window, stride), spectrogram_bins(window)
    checked_shape([channels, frames, bins], 4)
    if frames == 0 or channels == 0:
        return [np.zeros((channels, frames, bins), np.float32)]
    signal = np.ascontiguousarray(audio.astype(np.float32).T, dtype=np.float64)
    windows = np.lib.stride_tricks.sliding_window_view(signal, window, axis=1)[:, ::stride][:, :frames]
    spectrum = np.fft.rfft(windows * periodic_hann(window), n=fft_length(window), axis=-1)
    power = (spectrum.real * spectrum.real + spectrum.imag * spectrum.imag).astype(np.float32)
    return [power if squared else np.sqrt(power)]


# ---------------------------------------------------------------- Mfcc


def _c_int(x: float) -> int:
    """static_cast<int> of a double as x86 does it: truncation, INT_MIN when out of range or NaN."""
    if not math.isfinite(x) or not _INT32_MIN <= x < -_INT32_MIN:
        return _INT32_MIN
    return int(x)


def _mel(freq: float) -> float:
    return 1127.0 * math.log1p(freq / 700.0)


@dataclass(frozen=True)
class MelFilterbank:
    """TF's filterbank for one spectrogram width: bins start..end (inclusive) are used; bin
    start + k adds weights[k] of its magnitude to channel mapper[k] (when >= 0) and the rest
    to channel mapper[k] + 1 (when < channels).  `gives_up`: TF's Compute refuses the input
    (end past the last bin) and the MFCCs are all 0."""

    channels: int
    start: int
    end: int
    mapper: Array
    weights: Array
    gives_up: bool

    def matrix(self) -> Array:
        """[end - start + 1, channels] weights: sqrt of the used bins times this is the mel energy."""
        rows = np.arange(self.mapper.size)
        out = np.zeros((self.mapper.size, self.channels))
        right = self.mapper >= 0
        out[rows[right], self.mapper[right]] = self.weights[right]
        left = self.mapper + 1 < self.channels
        out[rows[left], self.mapper[left] + 1] = 1.0 - self.weights[left]
        return out

    def energies(self, power: Array) -> Array:
        """The mel energies of power spectra [..., bins] in double, summed in TF's order."""
        out = np.zeros(power.shape[:-1] + (self.channels,))
        if self.end < self.start:
            return out
        magnitude = np.sqrt(power[..., self.start:self.end + 1].astype(np.float64))
        weighted = magnitude * self.weights
        lead = (slice(None),) * (power.ndim - 1)
        # Per channel TF adds the left-side terms (bins of the channel before) first, then the
        # right-side ones, each in bin order: the same sequence as these two unbuffered adds.
        left = self.mapper + 1 < self.channels
        np.add.at(out, lead + (self.mapper[left] + 1,), (magnitude - weighted)[..., left])
        right = self.mapper >= 0
        np.add.at(out, lead + (self.mapper[right],), weighted[..., right])
        return out


@functools.lru_cache(maxsize=64)
def mel_filterbank(bins: int, sample_rate: int, channels: int, lower: float, upper: float) -> MelFilterbank:
    """TF's MfccMelFilterbank::Initialize, with its checks (as KernelErrors)."""
    if channels < 1:
        raise KernelError(f"filterbank_channel_count must be positive, got {channels}")
    if sample_rate <= 0:
        raise KernelError(f"Mfcc initialization failed for channel count {bins} and sample rate {sample_rate}: "
                          "sample rate must be positive")
    if bins < 2:
        raise KernelError(f"Mfcc initialization failed for channel count {bins} and sample rate {sample_rate}: "
                          "the spectrogram needs at least 2 bins")
    if not (math.isfinite(lower) and math.isfinite(upper)):
        raise KernelError(f"frequency limits must be finite, got {lower} and {upper}")
    if lower < 0:
        raise KernelError(f"lower_frequency_limit must be nonnegative, got {lower}")
    if upper <= lower:
        raise KernelError(f"upper_frequency_limit {upper} must be greater than lower_frequency_limit {lower}")
    mel_low = _mel(lower)
    spacing = (_mel(upper) - mel_low) / float(channels + 1)
    centers = [mel_low + spacing * (i + 1) for i in range(channels + 1)]
    hz_per_bin = 0.5 * sample_rate / float(bins - 1)
    start, end = _c_int(1.5 + lower / hz_per_bin), _c_int(upper / hz_per_bin)
    gives_up = end < 0 or end >= bins
    mapper: list[int] = []
    weights: list[float] = []
    channel = 0
    for i in range(max(start, 0), min(end, bins - 1) + 1):
        melf = _mel(i * hz_per_bin)
        while channel < channels and centers[channel] < melf:
            channel += 1
        mapper.append(channel - 1)
        if channel - 1 >= 0:
            weights.append((centers[channel] - melf) / (centers[channel] - centers[channel - 1]))
        else:
            weights.append((centers[0] - melf) / (centers[0] - mel_low))
    return MelFilterbank(channels, start, end, np.asarray(mapper, np.int64), np.asarray(weights, np.float64), gives_up)


@functools.lru_cache(maxsize=64)
def dct_matrix(channels: int, coefficients: int) -> Array:
    """TF's MfccDct cosines, [coefficients, channels]."""
    if coefficients < 1:
        raise KernelError(f"dct_coefficient_count must be positive, got {coefficients}")
    if coefficients > channels:
        raise KernelError(f"dct_coefficient_count {coefficients} must be at most filterbank_channel_count {channels}")
    norm = math.sqrt(2.0 / channels)
    arg = (math.atan(1) * 4) / channels
    return np.asarray([[norm * math.cos(i * arg * (j + 0.5)) for j in range(channels)] for i in range(coefficients)])


@dataclass(frozen=True)
class MfccDesign:
    filterbank: MelFilterbank
    dct: Array


def mfcc_design(attrs: Attrs, bins: int, sample_rate: int) -> MfccDesign:
    """The filterbank and DCT Mfcc's attributes ask for on spectra of `bins` bins.  The limits
    are float attributes: TF reads them as float32 before widening to double."""
    upper = float(np.float32(attr(attrs, "upper_frequency_limit", 4000.0)))
    lower = float(np.float32(attr(attrs, "lower_frequency_limit", 20.0)))
    channels = int(attr(attrs, "filterbank_channel_count", 40))
    coefficients = int(attr(attrs, "dct_coefficient_count", 13))
    filterbank = mel_filterbank(int(bins), int(sample_rate), channels, lower, upper)
    return MfccDesign(filterbank, dct_matrix(channels, coefficients))


def _check_rate_is_scalar(rate: Array) -> None:
    if rate.ndim != 0:
        raise KernelError(f"Input sample_rate should be a scalar tensor, got shape {list(rate.shape)} instead.")


@kernel("Mfcc")
def _mfcc(attrs: Attrs, inputs: list[Array]) -> list[Array]:
    spectrogram, rate = inputs
    require_rank(spectrogram, 3, "spectrogram")
    _check_rate_is_scalar(rate)
    design = mfcc_design(attrs, spectrogram.shape[2], scalar_int(rate, "sample_rate"))
    shape = spectrogram.shape[:2] + (design.dct.shape[0],)
    if design.filterbank.gives_up:
        return [np.zeros(shape, np.float32)]
    energies = design.filterbank.energies(spectrogram)
    logs = np.log(np.where(energies < FILTERBANK_FLOOR, FILTERBANK_FLOOR, energies))
    return [(logs @ design.dct.T).astype(np.float32).reshape(shape)]


# ---------------------------------------------------------------- WAV


_SKIPPED_CHUNKS = frozenset({b"JUNK", b"bext", b"iXML", b"qlty", b"mext", b"levl", b"link", b"axml"})


def _as_int32(x: int) -> int:
    return (x + (1 << 31)) % (1 << 32) - (1 << 31)


class _Reader:
    """wav_io.cc's cursor: an int offset, moved only through IncrementOffset's checks."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.offset = 0

    def advance(self, count: int) -> int:
        """Move on `count` bytes (int arithmetic wrapping as C's does); the old offset."""
        old = self.offset
        if old < 0:
            raise KernelError(f"Negative offsets are not allowed: {old}")
        if old > len(self.data):
            raise KernelError(f"Initial offset is outside data range: {old}")
        new = _as_int32(old + count)
        if new < 0 or new > len(self.data):  # a negative int compares as a huge size_t
            raise KernelError("Data too short when trying to read string")
        self.offset = new
        return old

    def text(self, count: int) -> bytes:
        start = self.advance(count)
        return self.data[start:self.offset]

    def expect(self, wanted: bytes) -> None:
        found = self.text(len(wanted))
        if found != wanted:
            raise KernelError(f"Header mismatch: Expected {wanted.decode()} but found "
                              f"{found.decode('latin-1')}")

    def value(self, code: str) -> int:
        return struct.unpack("<" + code, self.text(struct.calcsize(code)))[0]


def decode_wav(data: bytes) -> tuple[Array, int, int, int]:
    """(int16 samples interleaved, sample count, channel count, sample rate) of 16-bit PCM WAV bytes."""
    reader = _Reader(data)
    reader.expect(b"RIFF")
    reader.value("I")
    reader.expect(b"WAVE")
    chunk = reader.text(4)
    while chunk != b"fmt ":
        if chunk not in _SKIPPED_CHUNKS:
            raise KernelError(f"Unexpected field {chunk.decode('latin-1')}")
        reader.advance(reader.value("I"))
        chunk = reader.text(4)
    format_size = reader.value("I")
    if format_size not in (16, 18):
        raise KernelError(f"Bad format chunk size for WAV: Expected 16 or 18, but got{format_size}")
    audio_format = reader.value("H")
    if audio_format != 1:
        raise KernelError(f"Bad audio format for WAV: Expected 1 (PCM), but got{audio_format}")
    channels = reader.value("H")
    if channels < 1:
        raise KernelError(f"Bad number of channels for WAV: Expected at least 1, but got {channels}")
    rate, bytes_per_second, block = reader.value("I"), reader.value("I"), reader.value("H")
    bits = reader.value("H")
    if bits != 16:
        raise KernelError(f"Can only read 16-bit WAV files, but received {bits}")
    if block != (bits * channels + 7) // 8:
        raise KernelError(f"Bad bytes per sample in WAV header: Expected {(bits * channels + 7) // 8} but got {block}")
    if bytes_per_second != (block * rate) % (1 << 32):
        raise KernelError(f"Bad bytes per second in WAV header: Expected {(block * rate) % (1 << 32)} but got "
                          f"{bytes_per_second} (sample_rate={rate}, bytes_per_sample={block})")
    if format_size == 18:
        reader.offset += 2
    samples: Array | None = None
    count = 0
    while reader.offset < len(data):
        chunk = reader.text(4)
        size = reader.value("I")
        if size > (1 << 31) - 1:
            raise KernelError(f"WAV data chunk '{chunk.decode('latin-1')}' is too large: {size} bytes, but the "
                              f"limit is {(1 << 31) - 1}")
        if chunk != b"data":
            reader.offset = _as_int32(reader.offset + size)
            if reader.offset < 0:
                break
            continue
        if samples is not None:
            raise KernelError("More than one data chunk found in WAV")
        count = size // block
        start = reader.advance(2 * count * channels)
        samples = np.frombuffer(data, "<i2", count * channels, start).astype(np.int16)
    if samples is None:
        raise KernelError("No data chunk found in WAV")
    return samples, count, channels, rate


@kernel("DecodeWav")
def _decode_wav(attrs: Attrs, inputs: list[Array]) -> list[Array]:
    contents = inputs[0]
    if contents.ndim != 0:
        raise KernelError(f"contents must be scalar, got shape {list(contents.shape)}")
    data = contents.item()
    samples, count, channels, rate = decode_wav(data if isinstance(data, bytes) else str(data).encode())
    want_channels, want_samples = int(attr(attrs, "desired_channels", -1)), int(attr(attrs, "desired_samples", -1))
    if want_channels < -1:
        raise KernelError(f"desired_channels must be >= -1, got {want_channels}")
    if want_samples < -1:
        raise KernelError(f"desired_samples must be >= -1, got {want_samples}")
    rows = count if want_samples == -1 else want_samples
    columns = channels if want_channels == -1 else want_channels
    checked_shape([rows, columns], 4)
    decoded = samples.reshape(count, channels).astype(np.float32) * np.float32(1.0 / 32768)
    # Channels past the file's repeat its last one; samples past its end are silence.
    picked = decoded[:, np.minimum(np.arange(columns), channels - 1)]
    audio = np.zeros((rows, columns), np.float32)
    audio[:min(rows, count)] = picked[:rows]
    return [audio, np.asarray(_as_int32(rate), np.int32)]


def _to_int16(audio: Array) -> Array:
    """roundf(x * 32768) clamped to int16, NaN as 0 (what x86 makes of TF's cast)."""
    scaled = (audio.astype(np.float32) * np.float32(32768)).astype(np.float64)
    rounded = np.trunc(scaled + np.copysign(0.5, scaled))
    return np.nan_to_num(np.clip(rounded, -32768, 32767), nan=0.0).astype("<i2")


@kernel("EncodeWav")
def _encode_wav(attrs: Attrs, inputs: list[Array]) -> list[Array]:
    audio, rate = inputs
    require_rank(audio, 2, "audio")
    _check_rate_is_scalar(rate)
    if audio.size >= (1 << 31) - 1:
        raise KernelError("Cannot encode audio with >= max int32 elements")
    sample_rate = scalar_int(rate, "sample_rate") % (1 << 64)  # TF widens the int32 to size_t
    count, channels = audio.shape
    if sample_rate == 0 or sample_rate > (1 << 32) - 1:
        raise KernelError(f"sample_rate must be in (0, 2^32), got: {sample_rate}")
    if channels == 0 or channels > (1 << 16) - 1:
        raise KernelError(f"num_channels must be in (0, 2^16), got: {channels}")
    data_size = count * channels * 2
    if 44 + data_size > (1 << 32) - 1:
        raise KernelError("Provided channels and frames cannot be encoded as a WAV.")
    header = struct.pack("<4sI4s4sIHHIIHH4sI", b"RIFF", 36 + data_size, b"WAVE", b"fmt ", 16, 1, channels,
                         sample_rate, sample_rate * 2 * channels % (1 << 32), 2 * channels, 16, b"data", data_size)
    return [np.asarray(header + _to_int16(audio).tobytes(), object)]
