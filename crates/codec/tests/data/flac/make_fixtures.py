#!/usr/bin/env python3
"""Makes the FLAC test streams in this folder with the reference encoder.

Needs `flac` 1.4.2 (the libFLAC version DwarFS 0.15 requires). Each stream
is encoded from PCM bytes laid out as DwarFS's FLAC block header describes
them; `expected.tsv` records, per case, the header fields of the DwarFS
payload to wrap the stream in and the SHA-256 and length of the PCM bytes
decoding must give back. Run it in this folder; the output is deterministic.
"""
import hashlib
import math
import random
import struct
import subprocess

FLAG_BIG_ENDIAN, FLAG_SIGNED, FLAG_LSB_PADDING = 0x80, 0x40, 0x20


def signal(n, channels, bits, seed):
    """Frames of sines, silence, noise and coarse (wasted-bits) stretches."""
    rnd = random.Random(seed)
    top = 2 ** (bits - 1) - 1
    frames = []
    for i in range(n):
        part = (4 * i) // n
        fr = []
        for c in range(channels):
            if part == 0:  # correlated sines: stereo decorrelation, LPC
                v = int(top * 0.9 * math.sin(i / (15 + c)) + rnd.randint(-3, 3))
            elif part == 1:  # silence: constant subframes
                v = 0
            elif part == 2:  # low bits zero: wasted bits
                v = (int(top * 0.5 * math.sin(i / 9)) >> 6) << 6
            else:  # near full-scale noise: verbatim subframes, large residuals
                v = rnd.randint(-top - 1, top)
            fr.append(max(-top - 1, min(top, v)))
        frames.append(fr)
    return frames


def pack(frames, bits, nbytes, signed, big_endian, lsb_padding):
    out = bytearray()
    for fr in frames:
        for v in fr:
            u = v if signed else v + (1 << (bits - 1))
            if lsb_padding:
                u <<= 8 * nbytes - bits
            b = (u & ((1 << (8 * nbytes)) - 1)).to_bytes(nbytes, 'little')
            out += b[::-1] if big_endian else b
    return bytes(out)


def wav_extensible(pcm, channels, container_bits, valid_bits):
    nbytes = container_bits // 8
    guid_pcm = bytes.fromhex('0100000000001000800000aa00389b71')
    fmt = struct.pack('<HHIIHHHHI', 0xFFFE, channels, 48000, 48000 * channels * nbytes,
                      channels * nbytes, container_bits, 22, valid_bits, 0) + guid_pcm
    body = b'WAVE' + b'fmt ' + struct.pack('<I', len(fmt)) + fmt + b'data' + struct.pack('<I', len(pcm)) + pcm
    return b'RIFF' + struct.pack('<I', len(body)) + body


def encode(name, pcm_or_wav, raw_args, level):
    src = name + '.in'
    open(src, 'wb').write(pcm_or_wav)
    subprocess.run(['flac', '-s', '-f', '--lax', '--no-padding', level] + raw_args + ['-o', name + '.flac', src], check=True)
    subprocess.run(['rm', src], check=True)


def main():
    rows = []

    def case(name, stream, channels, bits, nbytes, signed, big_endian, lsb_padding, frames):
        flags = (nbytes - 1) | (FLAG_SIGNED if signed else 0) | (FLAG_BIG_ENDIAN if big_endian else 0) | (FLAG_LSB_PADDING if lsb_padding else 0)
        pcm = pack(frames, bits, nbytes, signed, big_endian, lsb_padding)
        rows.append(f'{name}\t{stream}\t{channels}\t{bits}\t{flags}\t{len(pcm)}\t{hashlib.sha256(pcm).hexdigest()}')
        return pcm

    def raw_case(name, channels, bits, signed, big_endian, level, n, seed):
        frames = signal(n, channels, bits, seed)
        pcm = case(name, name, channels, bits, bits // 8, signed, big_endian, False, frames)
        encode(name, pcm, ['--force-raw-format', '--endian=' + ('big' if big_endian else 'little'),
                           '--sign=' + ('signed' if signed else 'unsigned'), f'--channels={channels}',
                           f'--bps={bits}', '--sample-rate=48000'], level)
        return frames

    raw_case('u8-mono', 1, 8, False, False, '-5', 6000, 1)
    raw_case('s24be-stereo', 2, 24, True, True, '-8', 6000, 2)
    raw_case('s32le-stereo', 2, 32, True, False, '-5', 6000, 3)
    frames16 = raw_case('s16le-3ch', 3, 16, True, False, '-0', 5000, 4)
    # The same stream read back as unsigned big-endian samples.
    case('u16be-3ch', 's16le-3ch', 3, 16, 2, False, True, False, frames16)
    # 20 and 24 valid bits in wider WAV containers, padded below.
    for name, channels, container, valid, seed in [('s20in24-stereo', 2, 24, 20, 5), ('s24in32-mono', 1, 32, 24, 6)]:
        frames = signal(5000, channels, valid, seed)
        pcm = case(name, name, channels, valid, container // 8, True, False, True, frames)
        encode(name, wav_extensible(pcm, channels, container, valid), [], '-5')
        # The same samples padded above the value instead.
        case(name + '-msb', name, channels, valid, container // 8, True, False, False, frames)
    with open('expected.tsv', 'w') as f:
        f.write('# case\tstream\tchannels\tbits_per_sample\tflags\tsize\tsha256\n')
        f.write('\n'.join(rows) + '\n')


main()
