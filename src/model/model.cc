#include "model/model.h"

namespace drift {

Expected<std::unique_ptr<Model>> Model::load(const std::string& path, Isa isa) {
  DRIFT_ASSIGN_OR_RETURN(GgufFile file, GgufFile::open(path));
  std::unique_ptr<Model> model(new Model(std::move(file), isa));
  DRIFT_ASSIGN_OR_RETURN(model->config_, load_model_config(model->file_));
  DRIFT_ASSIGN_OR_RETURN(model->weights_, bind_model_weights(model->file_, model->config_, isa));
  return model;
}

}  // namespace drift
