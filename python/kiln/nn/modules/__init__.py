"""kiln.nn's layer classes (one file per family, as torch.nn.modules)."""

from kiln.nn.modules.module import Module  # noqa: F401
from kiln.nn.modules.linear import Bilinear, Identity, LazyLinear, Linear  # noqa: F401
from kiln.nn.modules.conv import (  # noqa: F401
    Conv1d, Conv2d, Conv3d, ConvTranspose1d, ConvTranspose2d, ConvTranspose3d, LazyConv1d, LazyConv2d, LazyConv3d,
    LazyConvTranspose1d, LazyConvTranspose2d, LazyConvTranspose3d,
)
from kiln.nn.modules.batchnorm import (  # noqa: F401
    BatchNorm1d, BatchNorm2d, BatchNorm3d, LazyBatchNorm1d, LazyBatchNorm2d, LazyBatchNorm3d,
)
from kiln.nn.modules.instancenorm import (  # noqa: F401
    InstanceNorm1d, InstanceNorm2d, InstanceNorm3d, LazyInstanceNorm1d, LazyInstanceNorm2d, LazyInstanceNorm3d,
)
from kiln.nn.modules.normalization import (  # noqa: F401
    CrossMapLRN2d, GroupNorm, LayerNorm, LocalResponseNorm, RMSNorm,
)
from kiln.nn.modules.sparse import Embedding, EmbeddingBag  # noqa: F401
from kiln.nn.modules.dropout import (  # noqa: F401
    AlphaDropout, Dropout, Dropout1d, Dropout2d, Dropout3d, FeatureAlphaDropout,
)
from kiln.nn.modules.activation import (  # noqa: F401
    CELU, ELU, GELU, GLU, Hardshrink, Hardsigmoid, Hardswish, Hardtanh, LeakyReLU, LogSigmoid, LogSoftmax, Mish,
    MultiheadAttention, PReLU, ReLU, ReLU6, RReLU, SELU, Sigmoid, SiLU, Softmax, Softmax2d, Softmin, Softplus,
    Softshrink, Softsign, Tanh, Tanhshrink, Threshold,
)
from kiln.nn.modules.flatten import Flatten, Unflatten  # noqa: F401
from kiln.nn.modules.pooling import (  # noqa: F401
    AdaptiveAvgPool1d, AdaptiveAvgPool2d, AdaptiveAvgPool3d, AdaptiveMaxPool1d, AdaptiveMaxPool2d, AdaptiveMaxPool3d,
    AvgPool1d, AvgPool2d, AvgPool3d, LPPool1d, LPPool2d, LPPool3d, MaxPool1d, MaxPool2d, MaxPool3d, MaxUnpool1d,
    MaxUnpool2d, MaxUnpool3d,
)
from kiln.nn.modules.upsampling import Upsample, UpsamplingBilinear2d, UpsamplingNearest2d  # noqa: F401
from kiln.nn.modules.rnn import GRU, GRUCell, LSTM, LSTMCell, RNN, RNNBase, RNNCell, RNNCellBase  # noqa: F401
from kiln.nn.modules.container import (  # noqa: F401
    Container, ModuleDict, ModuleList, ParameterDict, ParameterList, Sequential,
)
from kiln.nn.modules.loss import (  # noqa: F401
    BCELoss, BCEWithLogitsLoss, CosineEmbeddingLoss, CrossEntropyLoss, GaussianNLLLoss, HingeEmbeddingLoss, HuberLoss,
    KLDivLoss, L1Loss, MarginRankingLoss, MSELoss, MultiLabelMarginLoss, MultiLabelSoftMarginLoss, MultiMarginLoss,
    NLLLoss, NLLLoss2d, PoissonNLLLoss, SmoothL1Loss, SoftMarginLoss, TripletMarginLoss, TripletMarginWithDistanceLoss,
)
from kiln.nn.modules.padding import (  # noqa: F401
    CircularPad1d, CircularPad2d, CircularPad3d, ConstantPad1d, ConstantPad2d, ConstantPad3d, ReflectionPad1d,
    ReflectionPad2d, ReflectionPad3d, ReplicationPad1d, ReplicationPad2d, ReplicationPad3d, ZeroPad1d, ZeroPad2d,
    ZeroPad3d,
)
from kiln.nn.modules.pixelshuffle import ChannelShuffle, PixelShuffle, PixelUnshuffle  # noqa: F401
from kiln.nn.modules.distance import CosineSimilarity, PairwiseDistance  # noqa: F401
from kiln.nn.modules.transformer import (  # noqa: F401
    Transformer, TransformerDecoder, TransformerDecoderLayer, TransformerEncoder, TransformerEncoderLayer,
)
from kiln.nn.modules.fold import Fold, Unfold  # noqa: F401
