// synk's error hierarchy (base/errors.h) as Python exceptions, and the translator that turns
// every C++ synk::Error escaping a binding into its Python class with the same message:
//
//   synk.Error(Exception)
//   +-- synk.UserError                 the .synk program is wrong
//   |   +-- synk.LocatedUserError      ... at .line, .column of the source
//   +-- synk.UsageError(ValueError)    a wrong argument; nothing moved on any rank
//   |   +-- synk.ScatteredRowError     ... a bad value in scattered row .row
//   +-- synk.RankError(RuntimeError)   a failure inside ranks: .ranks, .group_lost
//   +-- synk.InternalError(RuntimeError)  a bug in synk
//
// UsageError is a ValueError and RankError a RuntimeError, so code that catches the built-in
// kinds keeps working. The classes are created once, at import, and live as long as the process
// (they are deliberately never released: C++ static destructors run after the interpreter ends).
#include "python/src/common.h"

namespace synkpy {

namespace {

struct ErrorClasses {
  PyObject* error = nullptr;
  PyObject* user = nullptr;
  PyObject* located = nullptr;
  PyObject* usage = nullptr;
  PyObject* scattered_row = nullptr;
  PyObject* rank = nullptr;
  PyObject* internal = nullptr;
};
ErrorClasses g_classes;

PyObject* new_class(py::module_& m, const char* name, const char* doc, std::vector<PyObject*> bases) {
  py::tuple base_tuple(bases.size());
  for (size_t i = 0; i < bases.size(); ++i) base_tuple[i] = py::reinterpret_borrow<py::object>(bases[i]);
  std::string qualified = std::string("synk.") + name;
  PyObject* cls = PyErr_NewExceptionWithDoc(qualified.c_str(), doc, base_tuple.ptr(), nullptr);
  if (!cls) throw py::error_already_set();
  m.attr(name) = py::reinterpret_borrow<py::object>(cls);   // the module's reference; ours leaks on purpose
  return cls;
}

// Raises `cls(message)` with extra attributes set on the instance.
void raise(PyObject* cls, const char* message, const std::vector<std::pair<const char*, py::object>>& attrs = {}) {
  py::object instance = py::reinterpret_steal<py::object>(PyObject_CallFunction(cls, "s", message));
  if (!instance) return;   // creating it failed: that error is set instead
  for (const auto& [key, value] : attrs) PyObject_SetAttrString(instance.ptr(), key, value.ptr());
  PyErr_SetObject(cls, instance.ptr());
}

void translate(std::exception_ptr p) {
  try {
    std::rethrow_exception(p);
  } catch (const synk::ScatteredRowError& e) {
    raise(g_classes.scattered_row, e.what(), {{"row", py::int_(e.row())}});
  } catch (const synk::UsageError& e) {
    raise(g_classes.usage, e.what());
  } catch (const synk::UserError& e) {   // with a place (LocatedUserError, the front end's errors) or without
    if (e.loc().valid())
      raise(g_classes.located, e.what(),
            {{"line", py::int_(e.loc().line)}, {"column", py::int_(e.loc().col)}, {"message", py::str(e.message())}});
    else
      raise(g_classes.user, e.what());
  } catch (const synk::RankError& e) {
    raise(g_classes.rank, e.what(), {{"ranks", py::cast(e.ranks())}, {"group_lost", py::bool_(e.group_lost())}});
  } catch (const synk::InternalError& e) {
    raise(g_classes.internal, e.what());
  } catch (const synk::Error& e) {
    raise(g_classes.error, e.what());
  }
}

}  // namespace

void init_errors(py::module_& m) {
  PyObject* exception = PyExc_Exception;
  g_classes.error = new_class(m, "Error", "Base class of every error synk raises.", {exception});
  g_classes.user = new_class(m, "UserError", "The .synk program is wrong (syntax, types, shapes, ...).",
                             {g_classes.error});
  g_classes.located = new_class(m, "LocatedUserError",
                                "A UserError at a known place of the source: .line, .column, .message.",
                                {g_classes.user});
  g_classes.usage = new_class(m, "UsageError",
                              "A wrong argument (dtype, shape, index, name, ...), found before any rank moved.",
                              {g_classes.error, PyExc_ValueError});
  g_classes.scattered_row = new_class(m, "ScatteredRowError",
                                      "A bad value in one scattered row (.row: its position among the call's rows).",
                                      {g_classes.usage});
  g_classes.rank = new_class(m, "RankError",
                             "A failure inside one or more ranks (.ranks); .group_lost: the group was shut down "
                             "(a worker died) and synk.fork() must be called again.",
                             {g_classes.error, PyExc_RuntimeError});
  g_classes.internal = new_class(m, "InternalError", "A bug in synk itself; please report it.",
                                 {g_classes.error, PyExc_RuntimeError});
  py::register_exception_translator(&translate);
}

}  // namespace synkpy
