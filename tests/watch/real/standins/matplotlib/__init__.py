"""A stand-in for matplotlib that draws nothing: every call returns a do-nothing object."""


class _Null:
    """Callable, any attribute, any index; unpacks as a pair (fig, axes)."""

    def __call__(self, *args, **kwargs):
        return self

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return self

    def __getitem__(self, key):
        return self

    def __setitem__(self, key, value):
        pass

    def __iter__(self):
        return iter((self, self))

    def __bool__(self):
        return False


NULL = _Null()


def use(*args, **kwargs):
    pass


def __getattr__(name):
    if name.startswith("__"):
        raise AttributeError(name)
    return NULL
