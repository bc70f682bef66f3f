"""kiln.nn: layers, parameters, initialisers and losses with torch.nn's API (see README.md)."""

from kiln.nn.parameter import Buffer, Parameter, UninitializedBuffer, UninitializedParameter  # noqa: F401
from kiln.nn import functional  # noqa: F401
from kiln.nn import attention  # noqa: F401
from kiln.nn import init  # noqa: F401
from kiln.nn.modules import (  # noqa: F401
    AdaptiveAvgPool2d, AvgPool2d, BatchNorm1d, BatchNorm2d, BCELoss, BCEWithLogitsLoss, Conv2d, CrossEntropyLoss,
    Dropout, Embedding, Flatten, GELU, GroupNorm, HuberLoss, Identity, L1Loss, LayerNorm, LeakyReLU, Linear,
    LogSoftmax, MaxPool2d, Module, ModuleDict, ModuleList, MSELoss, MultiheadAttention, NLLLoss, ReLU, RMSNorm,
    Sequential, Sigmoid, SiLU, SmoothL1Loss, Softmax, Tanh, Unflatten, ELU, Hardsigmoid, Hardswish, Hardtanh, Mish,
    ReLU6, Softplus, RNNBase, RNN, LSTM, GRU, RNNCellBase, RNNCell, LSTMCell, GRUCell,
    Bilinear, ChannelShuffle, ConstantPad1d, ConstantPad2d, ConstantPad3d, CosineSimilarity, GLU, Hardshrink,
    KLDivLoss, LogSigmoid, MarginRankingLoss, PairwiseDistance, PixelShuffle, PixelUnshuffle, ReflectionPad1d,
    ReflectionPad2d, ReplicationPad1d, ReplicationPad2d, Softmin, Softshrink, Softsign, Tanhshrink, Threshold,
    ZeroPad1d, ZeroPad2d, Transformer, TransformerDecoder, TransformerDecoderLayer, TransformerEncoder,
    TransformerEncoderLayer, LazyLinear, Fold, Unfold,
    Conv1d, Conv3d, ConvTranspose1d, ConvTranspose2d, ConvTranspose3d, AdaptiveAvgPool1d, AdaptiveMaxPool1d,
    AdaptiveMaxPool2d, AvgPool1d, MaxPool1d, BatchNorm3d, InstanceNorm1d, InstanceNorm2d, InstanceNorm3d, AlphaDropout,
    Dropout1d, Dropout2d, Dropout3d, FeatureAlphaDropout, Upsample, UpsamplingBilinear2d, UpsamplingNearest2d,
    EmbeddingBag,
    ParameterList, ParameterDict, Container, CELU, SELU, PReLU, RReLU, Softmax2d, CosineEmbeddingLoss,
    GaussianNLLLoss, HingeEmbeddingLoss, MultiLabelMarginLoss, MultiLabelSoftMarginLoss, MultiMarginLoss, NLLLoss2d,
    PoissonNLLLoss, SoftMarginLoss, TripletMarginLoss, TripletMarginWithDistanceLoss, LocalResponseNorm,
    CrossMapLRN2d,
    AdaptiveAvgPool3d, AdaptiveMaxPool3d, AvgPool3d, LPPool1d, LPPool2d, LPPool3d, MaxPool3d, MaxUnpool1d, MaxUnpool2d,
    MaxUnpool3d, CircularPad1d, CircularPad2d, CircularPad3d, ReflectionPad3d, ReplicationPad3d, ZeroPad3d,
    LazyConv1d, LazyConv2d, LazyConv3d, LazyConvTranspose1d, LazyConvTranspose2d, LazyConvTranspose3d, LazyBatchNorm1d,
    LazyBatchNorm2d, LazyBatchNorm3d, LazyInstanceNorm1d, LazyInstanceNorm2d, LazyInstanceNorm3d,
)
from kiln.nn import utils  # noqa: F401
