"""kiln.stft and kiln.istft: the short-time Fourier transform and its inverse, as torch's.

stft frames the (reflect-padded, when centred) signal with unfold, multiplies each frame by the
window (zero-padded to n_fft in the middle) and transforms the frames (rfft when onesided);
istft inverts the frames, windows them again and overlap-adds them with fold, dividing by the
overlap-added squared window. Both are compositions of differentiable ops.
"""

import warnings

import kiln

__all__ = ["stft", "istft"]


def _window_for(window, n_fft, win_length, like):
    win_length = n_fft if win_length is None else win_length
    if not 0 < win_length <= n_fft:
        raise RuntimeError(f"stft: expected 0 < win_length <= n_fft, but got win_length={win_length}")
    if window is None:
        window = kiln.ones(win_length, dtype=like.dtype.to_real() if like.dtype.is_complex else like.dtype,
                           device=like.device)
    elif window.ndim != 1 or window.shape[0] != win_length:
        raise RuntimeError(f"stft: expected a 1D window tensor of size equal to win_length={win_length}, but got "
                           f"window with size {list(window.shape)}")
    if win_length < n_fft:  # centred in n_fft
        left = (n_fft - win_length) // 2
        window = kiln.nn.functional.pad(window, [left, n_fft - win_length - left])
    return window


def stft(input, n_fft, hop_length=None, win_length=None, window=None, center=True, pad_mode="reflect",
         normalized=False, onesided=None, return_complex=None):
    """The frames' Fourier transforms, shape (batch?, n_fft // 2 + 1 or n_fft, frames)."""
    if return_complex is None and not (input.dtype.is_complex or (window is not None and window.dtype.is_complex)):
        raise RuntimeError("stft requires the return_complex parameter be given for real inputs, and will further "
                           "require that return_complex=True in a future PyTorch release.")
    if input.ndim not in (1, 2):
        raise RuntimeError(f"stft: expected a 1D or 2D tensor, but got {input.ndim}D tensor")
    hop_length = n_fft // 4 if hop_length is None else hop_length
    if hop_length <= 0:
        raise RuntimeError(f"stft: expected hop_length > 0, but got hop_length={hop_length}")
    x = input if input.ndim == 2 else input[None]
    if center:
        pad = n_fft // 2
        x = kiln.nn.functional.pad(x[:, None], [pad, pad], mode=pad_mode)[:, 0]
    if not 0 < n_fft <= x.shape[-1]:
        raise RuntimeError(f"stft: expected 0 < n_fft < {x.shape[-1]}, but got n_fft={n_fft}")
    window = _window_for(window, n_fft, win_length, x)
    frames = x.unfold(-1, n_fft, hop_length) * window  # (batch, frames, n_fft)
    complex_input = frames.dtype.is_complex
    onesided = not complex_input if onesided is None else onesided
    if onesided and complex_input:
        raise RuntimeError("Cannot have onesided output if window or input is complex")
    norm = "ortho" if normalized else "backward"
    spectrum = kiln.fft.rfft(frames, norm=norm) if onesided else kiln.fft.fft(frames, norm=norm)
    spectrum = spectrum.transpose(-1, -2)
    if input.ndim == 1:
        spectrum = spectrum[0]
    if not return_complex:
        warnings.warn("stft with return_complex=False is deprecated. In a future pytorch release, stft will return "
                      "complex tensors for all inputs, and return_complex=False will raise an error.\n"
                      "Note: you can still call torch.view_as_real on the complex output to recover the old return "
                      "format.", UserWarning, stacklevel=2)
        return kiln.view_as_real(spectrum)
    return spectrum


def istft(input, n_fft, hop_length=None, win_length=None, window=None, center=True, normalized=False,
          onesided=None, length=None, return_complex=False):
    """The signal whose stft is `input` (least squares over the overlapping frames)."""
    if not input.dtype.is_complex:
        raise RuntimeError("istft requires a complex-valued input tensor matching the output from stft with "
                           "return_complex=True.")
    if input.ndim not in (2, 3):
        raise RuntimeError(f"istft: expected a tensor with 2 or 3 dimensions of complex dtype, but got {input.ndim}")
    hop_length = n_fft // 4 if hop_length is None else hop_length
    spectrum = input if input.ndim == 3 else input[None]
    n_frames = spectrum.shape[-1]
    onesided = spectrum.shape[-2] != n_fft if onesided is None else onesided
    expected = n_fft // 2 + 1 if onesided else n_fft
    if spectrum.shape[-2] != expected:
        raise RuntimeError(f"istft: expected the frequency dimension (3rd to the last) of the input tensor to match "
                           f"n_fft / 2 + 1 when onesided=True, but got {spectrum.shape[-2]}" if onesided else
                           f"istft: expected the frequency dimension of the input tensor to match n_fft, but got "
                           f"{spectrum.shape[-2]}")
    if return_complex and onesided:
        raise RuntimeError("cannot have onesided output if window or input is complex")
    window = _window_for(window, n_fft, win_length, spectrum.real)
    norm = "ortho" if normalized else "backward"
    frames = spectrum.transpose(-1, -2)  # (batch, frames, freq)
    frames = kiln.fft.irfft(frames, n=n_fft, norm=norm) if onesided else kiln.fft.ifft(frames, norm=norm)
    if not return_complex and frames.dtype.is_complex:
        frames = frames.real
    frames = frames * window
    total = n_fft + hop_length * (n_frames - 1)
    fold = kiln.nn.functional.fold

    def overlap_add(columns):  # (batch, n_fft, frames) -> (batch, total)
        return fold(columns[:, :, :], (1, total), (1, n_fft), stride=(1, hop_length)).reshape(columns.shape[0], -1)

    if frames.dtype.is_complex:
        y = kiln.complex(overlap_add(frames.real.transpose(1, 2)), overlap_add(frames.imag.transpose(1, 2)))
    else:
        y = overlap_add(frames.transpose(1, 2))
    squared = (window * window).expand(1, n_frames, n_fft).transpose(1, 2)
    envelope = overlap_add(squared.contiguous())
    start = n_fft // 2 if center else 0
    end = total - (n_fft // 2 if center else 0) if length is None else start + length
    end = min(end, total)
    y, envelope = y[:, start:end], envelope[:, start:end]
    if bool((envelope.abs() < 1e-11).any()):
        raise RuntimeError("istft(...): window overlap add min must be at least 1e-11 (the NOLA condition)")
    y = y / envelope
    if length is not None and y.shape[-1] < length:
        y = kiln.nn.functional.pad(y, [0, length - y.shape[-1]])
    return y if input.ndim == 3 else y[0]
